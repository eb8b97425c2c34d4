#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The Module.symvers line modpost needs for nvidia_get_rm_ops(), which
# xpu.ko links against (docs/interposition.md), made from the NVIDIA driver
# module installed for the kernel being built for: the driver's own
# Module.symvers is kept by none of its packages (Ubuntu's and NVIDIA's
# DKMS packages, NVIDIA's precompiled kmods for RHEL), but the module says
# what it exports, and with what version (CRC) on a MODVERSIONS kernel.
#
# The module is the one depmod lists as exporting the symbol for that
# kernel (/lib/modules/KVER/modules.symbols), whatever its name or place:
# updates/dkms/nvidia.ko, extra/nvidia.ko.xz, kernel/nvidia-535srv/...
#
# Usage: nvidia-symvers.sh KERNELRELEASE OUT [ROOT]
#   ROOT: where lib/modules/KERNELRELEASE is (default /).
# Writes OUT and prints its path; prints nothing when no module installed for
# that kernel exports the symbol, or when its module cannot be read.
sym=nvidia_get_rm_ops
kver=$1
out=$2
root=${3:-/}
[ -n "$kver" ] && [ -n "$out" ] || { echo "usage: nvidia-symvers.sh KERNELRELEASE OUT [ROOT]" >&2; exit 2; }

ko=$(modinfo -b "$root" -k "$kver" -F filename "symbol:$sym" 2>/dev/null | head -n 1)
[ -n "$ko" ] && [ -f "$ko" ] || exit 0
case $ko in
*.xz) unpack="xz -dc" ;;
*.zst) unpack="zstd -dcq" ;;
*.gz) unpack="gzip -dc" ;;
*) unpack=cat ;;
esac
elf=$(mktemp) || exit 0
trap 'rm -f "$elf"' EXIT
$unpack "$ko" >"$elf" 2>/dev/null || exit 0

# section NDX -> "NAME OFFSET"
section() {
	readelf -S -W "$elf" | sed -n 's/^ *\[ *\([0-9]*\)\] \([^ ]*\) *[A-Z_0-9]* *[0-9a-f]* \([0-9a-f]*\) .*/\1 \2 \3/p' |
		awk -v n="$1" '$1 == n { print $2, $3 }'
}
# symbol NAME -> "VALUE NDX"
symbol() {
	readelf -s -W "$elf" | awk -v s="$1" '$8 == s { print $2, $7; exit }'
}

set -- $(symbol "__ksymtab_$sym")
[ $# -eq 2 ] || exit 0		# not exported after all
case $(section "$2") in
*gpl*) export=EXPORT_SYMBOL_GPL ;;
*) export=EXPORT_SYMBOL ;;
esac

# The CRC: none without MODVERSIONS; up to 5.19 the value of an absolute
# __crc_ symbol; from then on the 32-bit word at __crc_'s place in its
# section (modpost writes the CRCs into the module since 7b4537199a4a
# "kbuild: link symbol CRCs at final link, removing
# CONFIG_MODULE_REL_CRCS", v5.19).
crc=00000000
set -- $(symbol "__crc_$sym")
if [ $# -eq 2 ]; then
	if [ "$2" = ABS ]; then
		crc=$(printf '%s' "$1" | tail -c 8)
	else
		set -- "$1" $(section "$2")
		[ $# -eq 3 ] || exit 0
		crc=$(od -An -tx4 -j $((0x$3 + 0x$1)) -N 4 "$elf" | tr -d ' ')
		[ ${#crc} -eq 8 ] || exit 0
	fi
fi

module=${ko##*/}
module=${module%%.ko*}
printf '0x%s\t%s\t%s\t%s\t\n' "$crc" "$sym" "$module" "$export" >"$out" || exit 0
echo "$out"
