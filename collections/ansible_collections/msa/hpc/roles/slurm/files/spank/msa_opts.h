/* SPDX-License-Identifier: GPL-3.0-or-later */
/* The msa.hpc job options of sbatch/salloc/srun (seed 004 §4.2.1, §5.1.2, §5.2.2, §5.3): their names, one help
 * line each, and the syntax check the SPANK plugin applies before anything is submitted. The policy (pool size,
 * modules, NAM capacity, fabric reach) is judged by job_submit.lua on the controller, which sees every request. */
#ifndef MSA_OPTS_H
#define MSA_OPTS_H

#include <stddef.h>

enum msa_opt {
	MSA_GW_NUM, MSA_GW_FILE, MSA_GW_PLUGIN, MSA_GW_CLEANUP, MSA_GW_ENV,
	MSA_DELAY, MSA_MODULE_LIST, MSA_NAM, MSA_GCE, MSA_NOPTS
};

struct msa_optdef {
	const char *name;   /* the option as the user writes it (--name) */
	const char *arg;    /* argument shown by --help, NULL: a flag */
	const char *usage;  /* the one --help line */
	int has_arg;        /* 0 none, 1 required, 2 optional (SPANK's meaning) */
	const char *env;    /* the job-control variable (SPANK_ is prefixed by Slurm) job_submit.lua reads */
};

extern const struct msa_optdef msa_optdefs[MSA_NOPTS];

/* Check one option's value (NULL for a flag given bare). Returns 0 and the value to carry in out (NUL-ended), or
 * -1 with a message "--name=value: why" in err. */
int msa_check(int opt, const char *value, char *out, size_t outlen, char *err, size_t errlen);

#endif
