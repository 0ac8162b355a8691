/* SPDX-License-Identifier: GPL-3.0-or-later */
/* SPANK plugin of msa.hpc: registers the MSA options of sbatch, salloc and srun (msa_opts.h) and hands each
 * checked value to slurmctld as a job-control variable (SPANK_MSA_*, the job's spank_job_env), where
 * job_submit.lua turns them into licences, the job comment (msa: codec of module_utils/_jobopts.py), partitions
 * and begin times, or refuses the job. On the compute side (remote context) the values become the tasks'
 * environment (MSA_GW_NUM, ...; --gw_env's variables as given).
 * Built against Debian's libslurm-dev: gcc -shared -fPIC -o spank_msa.so spank_msa.c msa_opts.c */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

#include "msa_opts.h"

SPANK_PLUGIN(msa, 1);

#define MAX_VALUE 1025

static char values[MSA_NOPTS][MAX_VALUE];
static int given[MSA_NOPTS];

static int option_cb(int val, const char *optarg, int remote)
{
	char err[1400];

	if (val < 0 || val >= MSA_NOPTS)
		return -1;
	if (msa_check(val, optarg, values[val], sizeof(values[val]), err, sizeof(err))) {
		slurm_error("%s", err);
		return -1;
	}
	given[val] = 1;
	(void)remote;
	return 0;
}

/* The static table: srun (local context) and slurmstepd (remote) read it, and srun --help lists it. */
#define MSA_SPANK_OPT(id, name, arg, usage, has_arg, env) {name, arg, usage, has_arg, id, option_cb},
struct spank_option spank_options[] = {
	MSA_OPTIONS(MSA_SPANK_OPT)
	SPANK_OPTIONS_TABLE_END
};
#undef MSA_SPANK_OPT

/* sbatch and salloc (allocator context) do not read the static table in 22.05: there the options are registered
 * here, which also makes salloc --help list them. */
int slurm_spank_init(spank_t sp, int ac, char **av)
{
	int i;

	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_ALLOCATOR)
		return 0;
	for (i = 0; i < MSA_NOPTS; i++) {
		if (spank_option_register(sp, &spank_options[i]) != ESPANK_SUCCESS) {
			slurm_error("msa: cannot register --%s", spank_options[i].name);
			return -1;
		}
	}
	return 0;
}

/* sbatch/salloc/srun after option processing: the checked values go with the job request */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();
	int i;

	(void)ac;
	(void)av;
	if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR)
		return 0;
	for (i = 0; i < MSA_NOPTS; i++) {
		if (!given[i])
			continue;
		if (spank_job_control_setenv(sp, msa_optdefs[i].env, values[i], 1) != ESPANK_SUCCESS) {
			slurm_error("msa: cannot pass --%s to the controller", msa_optdefs[i].name);
			return -1;
		}
	}
	return 0;
}

/* each task sees what it asked for; --gw_env's variables are set as given */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	int i;

	(void)ac;
	(void)av;
	for (i = 0; i < MSA_NOPTS; i++) {
		if (!given[i])
			continue;
		if (i == MSA_GW_ENV) {
			char copy[MAX_VALUE], *item, *save = NULL;
			memcpy(copy, values[i], sizeof(copy));
			for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
				char *eq = strchr(item, '=');
				*eq = '\0';
				spank_setenv(sp, item, eq + 1, 1);
			}
		}
		spank_setenv(sp, msa_optdefs[i].env, values[i], 1);
	}
	return 0;
}
