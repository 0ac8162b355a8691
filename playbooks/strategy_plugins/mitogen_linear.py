# Copyright: msa.hpc contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mitogen's ``mitogen_linear`` strategy (``ansible_mitogen``, pinned in requirements.txt), with the list of
installed collections read once per run.

Mitogen's planner lists every installed collection (``ansible.collections.list.list_collection_dirs``, which
reads the metadata of each of the ~100 collections of the ``ansible`` package) the first time a worker runs a
collection module, and Ansible forks a new worker for every task of every host: measured with py-spy on a
no-change ``site.yml`` of ``mini``, that listing was 22 % of the controller's CPU. Here it is read once in the
controller before the first worker forks, and every worker inherits the result.

Mitogen's CPU pinning is switched off. Its policy (``ansible_mitogen.affinity``) pins its own processes and, on a
machine with 2 or 3 CPUs, every process it starts (ssh, and the local commands of tasks on the control host) to all
CPUs but the first, which it keeps for its connection multiplexer. Those processes pass the mask on to what they
start: on a 2-core host every container ``sim_up`` started, with the whole simulated system inside, ran on one CPU
while the other stayed idle (``Cpus_allowed_list: 1``; vmstat 49 % idle with 10-70 runnable tasks). With the
policy a no-op, the kernel schedules every process on every CPU.
"""
from __future__ import annotations

import ansible.collections.list as collection_list

import ansible_mitogen.affinity
import ansible_mitogen.loaders
import ansible_mitogen.strategy

_list_collection_dirs = collection_list.list_collection_dirs
_listed: tuple | None = None


def _list_collection_dirs_once(*args, **kwargs):
    """The default listing (no search paths or filter given) from the first call; any other one as before."""
    global _listed  # noqa: PLW0603 - the per-run cache the forked workers inherit
    if args or kwargs:
        return _list_collection_dirs(*args, **kwargs)
    if _listed is None:
        _listed = tuple(_list_collection_dirs())
    return iter(_listed)


collection_list.list_collection_dirs = _list_collection_dirs_once
# the base Policy's methods do nothing: no process of the run (or started by it) is pinned to a CPU
ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()

Base = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, Base):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _list_collection_dirs_once()  # in the controller, before any worker forks
