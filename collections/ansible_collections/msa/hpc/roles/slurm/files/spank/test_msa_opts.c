/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Test driver of msa_opts.c: `test_msa_opts NAME [VALUE]` prints "ok <value>" (exit 0) or the refusal (exit 1);
 * `test_msa_opts --list` prints the --help lines. Run by tests/test_spank_options.py. */
#include <stdio.h>
#include <string.h>

#include "msa_opts.h"

int main(int argc, char **argv)
{
	char out[1100], err[1400];
	int i;

	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (i = 0; i < MSA_NOPTS; i++)
			printf("--%s%s%s\t%s\n", msa_optdefs[i].name, msa_optdefs[i].arg ? "=" : "",
			       msa_optdefs[i].arg ? msa_optdefs[i].arg : "", msa_optdefs[i].usage);
		return 0;
	}
	if (argc < 2 || argc > 3)
		return 2;
	for (i = 0; i < MSA_NOPTS; i++) {
		if (strcmp(argv[1], msa_optdefs[i].name))
			continue;
		if (msa_check(i, argc == 3 ? argv[2] : NULL, out, sizeof(out), err, sizeof(err))) {
			printf("%s\n", err);
			return 1;
		}
		printf("ok %s\n", out);
		return 0;
	}
	printf("unknown option %s\n", argv[1]);
	return 2;
}
