# bash completion for xpuctl                               -*- shell-script -*-
# SPDX-License-Identifier: Apache-2.0
#
# Install as /usr/share/bash-completion/completions/xpuctl.  Static: commands,
# options and their fixed values; tests/unit/xpud/test_xpud_cli.py checks it
# against xpuctl's parser.

_xpuctl()
{
	local cur=${COMP_WORDS[COMP_CWORD]}
	local prev=${COMP_WORDS[COMP_CWORD-1]}
	local commands="gpus list show create set destroy bind unbind release run top events version cdi"
	local i cmd="" opts

	# The command is the first word that is neither an option nor its value.
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		--socket | --device) ((i++)) ;;
		-*) ;;
		*) cmd=${COMP_WORDS[i]}; break ;;
		esac
	done

	# After `run NAME --`: a command line of its own.
	if [[ $cmd == run ]]; then
		for ((i = i + 1; i < COMP_CWORD; i++)); do
			if [[ ${COMP_WORDS[i]} == -- ]]; then
				COMPREPLY=($(compgen -c -- "$cur"))
				return
			fi
		done
	fi

	# `cdi SUBCOMMAND`: its own words.
	local sub=""
	if [[ $cmd == cdi ]]; then
		for ((i = i + 1; i < COMP_CWORD; i++)); do
			case ${COMP_WORDS[i]} in
			--socket) ((i++)) ;;
			-*) ;;
			*) sub=${COMP_WORDS[i]}; break ;;
			esac
		done
	fi

	case $prev in
	--socket | --device)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--cgroup)
		COMPREPLY=($(compgen -d -- "$cur"))
		return ;;
	--priority)
		COMPREPLY=($(compgen -W "low normal high" -- "$cur"))
		return ;;
	-o | --output)
		if [[ $cmd == cdi ]]; then
			COMPREPLY=($(compgen -W "json yaml" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "table json" -- "$cur"))
		fi
		return ;;
	--gpu | --memory | --host-memory | --compute | --weight | --interval | --count)
		return ;;
	esac

	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "-h --help --version --device --debug --socket" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$commands" -- "$cur"))
		fi
		return
	fi

	case $cmd in
	gpus) opts="-h --help --socket --debug -o --output" ;;
	list) opts="-h --help --socket --debug -o --output" ;;
	show) opts="-h --help --socket --debug -o --output" ;;
	create) opts="-h --help --socket --debug --gpu --memory --compute --weight --priority --host-memory" ;;
	set) opts="-h --help --socket --debug --memory --compute --weight --priority --host-memory" ;;
	destroy) opts="-h --help --socket --debug --force" ;;
	bind) opts="-h --help --socket --debug --cgroup" ;;
	unbind) opts="-h --help --socket --debug --cgroup" ;;
	release) opts="-h --help --socket --debug" ;;
	run) opts="-h --help --socket --debug" ;;
	top) opts="-h --help --socket --debug -o --output --interval --count --once" ;;
	events) opts="-h --help --socket --debug -o --output --count" ;;
	version) opts="-h --help --socket --debug -o --output" ;;
	cdi) opts="-h --help"
		case $sub in
		"")
			if [[ $cur != -* ]]; then
				COMPREPLY=($(compgen -W "spec refresh" -- "$cur"))
				return
			fi ;;
		spec) opts="-h --help --socket --debug -o --output" ;;
		refresh) opts="-h --help --socket --debug" ;;
		*) return ;;
		esac ;;
	*) return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
	fi
}
complete -F _xpuctl xpuctl
