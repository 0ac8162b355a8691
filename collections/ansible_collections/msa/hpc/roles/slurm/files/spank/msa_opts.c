/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Syntax of the msa.hpc job options; no Slurm header, so tests/test_spank_options.py builds it into a test binary. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "msa_opts.h"

#define MAX_VALUE 1024

#define MSA_DEF(id, name, arg, usage, has_arg, env) [id] = {name, arg, usage, has_arg, env},
const struct msa_optdef msa_optdefs[MSA_NOPTS] = { MSA_OPTIONS(MSA_DEF) };
#undef MSA_DEF

static int fail(char *err, size_t errlen, int opt, const char *value, const char *why)
{
	if (value)
		snprintf(err, errlen, "--%s=%s: %s", msa_optdefs[opt].name, value, why);
	else
		snprintf(err, errlen, "--%s: %s", msa_optdefs[opt].name, why);
	return -1;
}

/* digits only, no sign, at most 6 of them, within [lo, hi] */
static int whole(const char *s, long lo, long hi)
{
	long n = 0;
	size_t i;

	if (!s[0] || strlen(s) > 6)
		return 0;
	for (i = 0; s[i]; i++) {
		if (!isdigit((unsigned char)s[i]))
			return 0;
		n = n * 10 + (s[i] - '0');
	}
	return n >= lo && n <= hi;
}

static int name_ok(const char *s, size_t max, int lower)
{
	size_t i, n = strlen(s);

	if (!n || n > max)
		return 0;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!(isalnum(c) || c == '_' || c == '-') || (lower && isupper(c)))
			return 0;
	}
	return 1;
}

/* a file name: no white space, ';', ',', '=', no ".." component, not "~...", not ending in '/' */
static int path_ok(const char *s)
{
	const char *p;
	size_t n = strlen(s);

	if (!n || n > MAX_VALUE || s[0] == '~' || s[n - 1] == '/')
		return 0;
	for (p = s; *p; p++)
		if (isspace((unsigned char)*p) || strchr(";,=", *p))
			return 0;
	for (p = s; (p = strstr(p, "..")); p += 2)
		if ((p == s || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
			return 0;
	return 1;
}

/* SIZE: digits, then K/M/G/T/P/E with optional i and B, or B alone (as module_utils/_sizes.py reads it) */
static int size_ok(const char *s)
{
	size_t i = 0;

	while (isdigit((unsigned char)s[i]))
		i++;
	if (i == 0 || i > 18)
		return 0;
	if (s[i] && strchr("KMGTPEkmgtpe", s[i])) {
		i++;
		if (s[i] == 'i' || s[i] == 'I')
			i++;
	}
	if (s[i] == 'B' || s[i] == 'b')
		i++;
	return s[i] == '\0';
}

static int env_ok(const char *s)
{
	char copy[MAX_VALUE + 1], *item, *save = NULL;

	if (!s[0] || strlen(s) > MAX_VALUE)
		return 0;
	strcpy(copy, s);
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		size_t i;
		if (!eq || eq == item || !(isalpha((unsigned char)item[0]) || item[0] == '_'))
			return 0;
		for (i = 0; item + i < eq; i++)
			if (!(isalnum((unsigned char)item[i]) || item[i] == '_'))
				return 0;
		for (i = 0; eq[i]; i++)
			if (isspace((unsigned char)eq[i]) || eq[i] == ';')
				return 0;
	}
	return 1;
}

static int list_ok(const char *s)
{
	char copy[MAX_VALUE + 1], *item, *save = NULL;
	const char *seen[16];
	int n = 0, i;

	if (!s[0] || strlen(s) > 256 || s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
		return 0;
	strcpy(copy, s);
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (!name_ok(item, 64, 1) || n == 16)
			return 0;
		for (i = 0; i < n; i++)
			if (!strcmp(seen[i], item))
				return 0;
		seen[n++] = item;
	}
	return n > 0;
}

int msa_check(int opt, const char *value, char *out, size_t outlen, char *err, size_t errlen)
{
	const char *v = value;
	char buf[MAX_VALUE + 1];

	if (opt < 0 || opt >= MSA_NOPTS)
		return fail(err, errlen, MSA_GW_NUM, NULL, "unknown option");
	if (msa_optdefs[opt].has_arg == 1 && (!value || !value[0]))
		return fail(err, errlen, opt, "", "needs a value");
	if (value && strlen(value) > MAX_VALUE)
		return fail(err, errlen, opt, "...", "value too long");
	switch (opt) {
	case MSA_GW_NUM:
		if (!whole(value, 1, 4096))
			return fail(err, errlen, opt, value, "not a whole number of gateways from 1 to 4096");
		break;
	case MSA_GW_FILE:
		if (!path_ok(value))
			return fail(err, errlen, opt, value, "not a usable file name (no '..', '~', blanks, ';', ',', '=')");
		break;
	case MSA_GW_PLUGIN:
		if (!name_ok(value, 64, 0))
			return fail(err, errlen, opt, value, "not a bare name (letters, digits, '_', '-')");
		break;
	case MSA_GW_CLEANUP:
		v = "1";
		break;
	case MSA_GW_ENV:
		if (!env_ok(value))
			return fail(err, errlen, opt, value, "not VAR=VALUE[,VAR=VALUE...]");
		break;
	case MSA_DELAY:
		if (!whole(value, 0, 525600))
			return fail(err, errlen, opt, value, "not a whole number of minutes (0 or more)");
		break;
	case MSA_MODULE_LIST:
		if (!list_ok(value))
			return fail(err, errlen, opt, value, "not a list of distinct module names (cm,esb)");
		break;
	case MSA_NAM: {
		char *colon;
		snprintf(buf, sizeof(buf), "%s", value);
		colon = strchr(buf, ':');
		if (colon) {
			*colon = '\0';
			if (strcmp(colon + 1, "nonvolatile") && strcmp(colon + 1, "volatile"))
				return fail(err, errlen, opt, value, "the flag after ':' is not nonvolatile");
		}
		if (!size_ok(buf) || strspn(buf, "0") >= strspn(buf, "0123456789"))
			return fail(err, errlen, opt, value, "not a size (a positive number with K, M, G or T)");
		break;
	}
	case MSA_GCE:
		/* "(null)": how sbatch/salloc pass a flag given without a value on to the job's environment (glibc's
		 * printf of a NULL optarg), which an srun inside the job reads back */
		if (!value || !value[0] || !strcmp(value, "(null)"))
			v = "enabled";
		else if (strcmp(value, "enabled") && strcmp(value, "disabled"))
			return fail(err, errlen, opt, value, "neither enabled nor disabled");
		break;
	}
	if (strlen(v) >= outlen)
		return fail(err, errlen, opt, "...", "value too long");
	strcpy(out, v);
	return 0;
}
