# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Stand-in ParaStation gateway daemon (psgwd), its per-node agent, a ping-pong test and the Slurm prolog/epilog."""

DEFAULT_MTU = 65536
MTU_ENV = "PSP_GW_MTU"
ROUTING_FILE_ENV = "MSA_GW_ROUTING_FILE"
PSCOM_ROUTING_FILE_ENV = "PSP_GW_SERVER"
SECRET_FILE_ENV = "MSA_GW_SECRET_FILE"
