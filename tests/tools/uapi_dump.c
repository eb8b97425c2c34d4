// SPDX-License-Identifier: Apache-2.0
/*
 * Prints the numbers and struct layouts of kmod/include/uapi/xpu.h as JSON, as
 * a C compiler sees them, for tests/unit/test_uapi.py to compare with xpud's
 * xpu/uapi.py.  List every XPU_* macro and every struct of the header here:
 * the test checks that nothing is missing.
 *
 *	cc -std=c11 -I kmod/include/uapi -o uapi_dump tests/tools/uapi_dump.c
 */
#include <stddef.h>
#include <stdio.h>
#include <xpu.h>

static const char *sep = "";

static void num(const char *name, unsigned long long value)
{
	printf("%s\n    \"%s\": %llu", sep, name, value);
	sep = ",";
}

static void str(const char *name, const char *value)
{
	/* The header's strings are plain names: nothing to escape. */
	printf("%s\n    \"%s\": \"%s\"", sep, name, value);
	sep = ",";
}

static void struct_begin(const char *name, size_t size, size_t align)
{
	printf("%s\n    \"%s\": {\"size\": %zu, \"align\": %zu, \"fields\": [",
	       sep, name, size, align);
	sep = "";
}

static void field(const char *name, size_t offset, size_t size)
{
	printf("%s\n      {\"name\": \"%s\", \"offset\": %zu, \"size\": %zu}",
	       sep, name, offset, size);
	sep = ",";
}

static void struct_end(void)
{
	printf("\n    ]}");
	sep = ",";
}

#define NUM(m)		num(#m, (unsigned long long)(m))
#define STR(m)		str(#m, m)
#define STRUCT(s)	struct_begin(#s, sizeof(struct s), _Alignof(struct s))
#define FIELD(s, f)	field(#f, offsetof(struct s, f), \
			      sizeof(((struct s *)0)->f))

int main(void)
{
	printf("{\n  \"constants\": {");
	NUM(XPU_IOC_TYPE);
	NUM(XPU_API_VERSION);
	STR(XPU_CTL_NAME);
	NUM(XPU_VERSION_FLAGS_ALL);
	NUM(XPU_IOC_VERSION);
	printf("\n  },\n  \"structs\": {");
	sep = "";

	STRUCT(xpu_version);
	FIELD(xpu_version, argsz);
	FIELD(xpu_version, flags);
	FIELD(xpu_version, api);
	FIELD(xpu_version, major);
	FIELD(xpu_version, minor);
	FIELD(xpu_version, patch);
	struct_end();

	printf("\n  }\n}\n");
	return 0;
}
