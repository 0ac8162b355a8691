/* SPDX-License-Identifier: GPL-3.0-or-later */
/* The msa.hpc job options of sbatch/salloc/srun (seed 004 §4.2.1, §5.1.2, §5.2.2, §5.3): their names, one help
 * line each, and the syntax check the SPANK plugin applies before anything is submitted. The policy (pool size,
 * modules, NAM capacity, fabric reach) is judged by job_submit.lua on the controller, which sees every request. */
#ifndef MSA_OPTS_H
#define MSA_OPTS_H

#include <stddef.h>

/* The options, once: X(id, name, argument shown by --help or NULL for a flag, --help line, has_arg (0 none,
 * 1 required, 2 optional), job-control variable). Expanded into msa_optdefs here and into SPANK's static
 * spank_options table in spank_msa.c (the table sbatch and srun read for --help). */
#define MSA_OPTIONS(X) \
	X(MSA_GW_NUM, "gw_num", "N", "MPI gateways for this heterogeneous job", 1, "MSA_GW_NUM") \
	X(MSA_GW_FILE, "gw_file", "path", "routing file (default psgw-route-<jobid>)", 1, \
	  "MSA_GW_FILE") \
	X(MSA_GW_PLUGIN, "gw_plugin", "name", "gateway routing strategy (built-in or site)", 1, \
	  "MSA_GW_PLUGIN") \
	X(MSA_GW_CLEANUP, "gw_cleanup", NULL, "remove the routing file when the job ends", 0, "MSA_GW_CLEANUP") \
	X(MSA_GW_ENV, "gw_env", "VAR=VAL[,..]", "environment of the job's gateway steps", 1, \
	  "MSA_GW_ENV") \
	X(MSA_DELAY, "delay", "minutes", "start M minutes after submission/after:<job>", 1, "MSA_DELAY") \
	X(MSA_MODULE_LIST, "module-list", "m1,m2", "run on the listed module that starts it first", \
	  1, "MSA_MODULE_LIST") \
	X(MSA_NAM, "network-attached-memory", "SIZE[:nonvolatile]", "NAM for the job (ESB/DAM; K,M,G,T=1024^n)", 1, \
	  "MSA_NAM") \
	X(MSA_GCE, "global-collective-engine", "enabled|disabled", "a communicator of the GCE (ESB/DAM)", 2, \
	  "MSA_GCE")

#define MSA_ENUM(id, name, arg, usage, has_arg, env) id,
enum msa_opt { MSA_OPTIONS(MSA_ENUM) MSA_NOPTS };
#undef MSA_ENUM

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
