# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_packjob's CLI transport: Slurm through sbatch, squeue, sacct and scancel on the host the module runs on."""
from __future__ import annotations

from ansible_collections.msa.hpc.plugins.module_utils.slurm.modulelist import parse_test_only
from ansible_collections.msa.hpc.plugins.module_utils.slurm.records import (
    TransportError, parse_sacct_json, parse_sbatch_id, parse_squeue_json)


class CliTransport:
    """Slurm through its commands (sbatch, squeue, sacct, scontrol, scancel).

    ``run_command(argv, data=None)`` returns ``(rc, stdout, stderr)`` (AnsibleModule.run_command fits). A REST
    transport (slurm/rest.py) offers the same four methods: submit, jobs, history, cancel; only this one can
    ``estimate`` (slurmrestd v0.0.38 has no test-only submission). ``submit`` and ``estimate`` take a submission of
    render.plan/estimate_plan.
    """

    def __init__(self, run_command, commands=None):
        self._run_command = run_command
        self.commands = {"sbatch": "sbatch", "squeue": "squeue", "sacct": "sacct", "scontrol": "scontrol",
                         "scancel": "scancel"}
        self.commands.update(commands or {})

    def _run(self, argv, data=None):
        rc, out, err = self._run_command(argv, data=data) if data is not None else self._run_command(argv)
        if rc != 0:
            raise TransportError("%s failed (exit %s): %s" % (" ".join(argv[:2]), rc, (err or out or "").strip()[:500]))
        return out

    def submit(self, sub):
        """Run one planned sbatch (``sub`` from plan: its argv, its script on standard input); return the job id."""
        argv = [self.commands["sbatch"]] + list(sub["argv"][1:])
        return parse_sbatch_id(self._run(argv, data=sub["script"]))

    def estimate(self, sub):
        """Ask ``sbatch --test-only`` (``sub`` from estimate_plan) when and where the job would start;
        parse_test_only's dict, or TransportError with Slurm's reason when it cannot run."""
        argv = [self.commands["sbatch"]] + list(sub["argv"][1:])
        rc, out, err = self._run_command(argv, data=sub["script"])
        text = "%s\n%s" % (err or "", out or "")
        if rc != 0:
            parse_test_only("\n".join(line for line in text.splitlines() if "to start at" not in line))
        return parse_test_only(text)

    def jobs(self, user=None):
        """Every job slurmctld still holds (pending, running and recently finished), as records."""
        argv = [self.commands["squeue"], "--json", "--all", "--states=all"]
        if user:
            argv.append("--user=%s" % user)
        return parse_squeue_json(self._run(argv))

    def history(self, job_ids):
        """Records of finished jobs from accounting (sacct); needs slurmdbd."""
        if not job_ids:
            return []
        return parse_sacct_json(self._run([self.commands["sacct"], "--json", "--jobs=%s"
                                           % ",".join(str(i) for i in job_ids)]))

    def cancel(self, job_ids):
        if job_ids:
            self._run([self.commands["scancel"]] + [str(i) for i in job_ids])
