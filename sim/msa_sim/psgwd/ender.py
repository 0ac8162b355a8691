# SPDX-License-Identifier: GPL-3.0-or-later
"""The psgw agent's end of a job whose psgwd died: the job is ended in Slurm, with the reason kept beside it."""
from __future__ import annotations

import logging
import os
import subprocess
import threading

from ansible_collections.msa.hpc.plugins.module_utils.slurm.jobs import JobRecordError, check_job_id

log = logging.getLogger("psgw-agent")


class JobEnder:
    """Ends in Slurm the job whose psgwd died on this gateway, once per job and off the caller's thread.

    ``end(job)`` returns at once; a thread then runs, each bounded by ``timeout`` and independent of the others:
    ``scontrol notify <job> <message>`` (the line lands in the job's stderr), ``scontrol update JobId=<job>
    AdminComment=<message>`` (kept with the job: ``scontrol show job``, ``sacct -o AdminComment``) and
    ``scancel <job>`` (the job ends CANCELLED). ``run`` and ``spawn`` are injectable for tests."""

    def __init__(self, gateway, scontrol="scontrol", scancel="scancel", run=subprocess.run, timeout=30.0,
                 spawn=None, conf_server=None):
        self.gateway = gateway
        # a gateway is no Slurm node and keeps no slurm.conf: its commands fetch it from slurmctld (configless)
        self.env = dict(os.environ, SLURM_CONF_SERVER=conf_server) if conf_server else None
        self.scontrol = scontrol
        self.scancel = scancel
        self.run = run
        self.timeout = timeout
        self.spawn = spawn or (lambda fn, *a: threading.Thread(target=fn, args=a, daemon=True,
                                                               name="end-job-%s" % a[0]).start())
        self.ended = set()
        self.results = {}

    def message(self, job):
        return ("psgw: gateway %s: the gateway daemon (psgwd) of job %s died; the job's connections between the "
                "modules through %s are cut, so the gateway ended the job" % (self.gateway, job, self.gateway))

    def end(self, job):
        """Start ending ``job`` (a Slurm job id, checked); False when it was already ended or is no job id."""
        try:
            job = check_job_id(job, "job")
        except JobRecordError as exc:
            log.error("psgwd gone, job not ended in Slurm: %s", exc)
            return False
        if job in self.ended:
            return False
        self.ended.add(job)
        log.error("job %s: its psgwd is gone; ending it in Slurm", job)
        self.spawn(self._end, job)
        return True

    def forget(self, job):
        """The job's psgwd record is gone (the epilog's DELETE): a later job with the id would be ended again."""
        self.ended.discard(str(job))

    def _end(self, job):
        msg = self.message(job)
        steps = [("notify", [self.scontrol, "notify", job, msg]),
                 ("comment", [self.scontrol, "update", "JobId=%s" % job, "AdminComment=%s" % msg]),
                 ("cancel", [self.scancel, job])]
        done = {}
        for step, argv in steps:
            try:
                res = self.run(argv, capture_output=True, text=True, timeout=self.timeout, check=False, env=self.env)
            except (OSError, subprocess.SubprocessError) as exc:
                done[step] = str(exc)
            else:
                done[step] = "ok" if res.returncode == 0 else (
                    (res.stderr or res.stdout or "").strip() or "exit %d" % res.returncode)
            if done[step] != "ok":
                log.error("job %s: %s failed: %s: %s", job, step, " ".join(argv[:2]), done[step])
        self.results[job] = done
        log.info("job %s ended in Slurm (%s): %s", job, ", ".join("%s %s" % kv for kv in done.items()), msg)
        return done
