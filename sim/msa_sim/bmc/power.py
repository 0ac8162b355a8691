# SPDX-License-Identifier: GPL-3.0-or-later
"""Power of one simulated node behind its BMC: state, resets, graceful shutdown in the background, boots seen."""
from __future__ import annotations

import math
import threading

from msa_sim.bmc.backend import BackendError
from msa_sim.bmc.boot_image import boot_image
from msa_sim.bmc.resource import Fail


class PowerMixin:
    """Power state and ComputerSystem.Reset; ``power_event`` (EventsMixin) hears every change."""

    def __init__(self):
        self._power_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._observe_lock = threading.RLock()  # power-state bookkeeping is read-modify-write
        self._transition = None
        self._cancel = False
        self._worker = None

    def power_state(self):
        with self._state_lock:
            if self._transition:
                return self._transition
        state = "On" if self.backend.is_on(self.conf["container"]) else "Off"
        self._observe(state)
        return state

    def _observe(self, state):
        """Track power transitions, so a start from outside the BMC also counts as a boot."""
        with self._observe_lock:
            row = self.store.system(self.name)
            if row["last_power"] == "Off" and state == "On":
                self._booted()
            elif row["last_power"] != state:
                self.store.update_system(self.name, last_power=state)
                if row["last_power"] is not None:
                    self.power_event(state)

    def _power_on(self, container):
        """Power on; an override to UefiHttp with an HttpBootUri boots that image (the backend recreates the node
        from it). A failed power-on consumes nothing: a Once override stays for the next attempt."""
        row = self.store.system(self.name)
        image = None
        if row["boot_enabled"] != "Disabled" and row["boot_target"] == "UefiHttp":
            uri = self.settings().get("http_boot_uri")
            try:  # checked again at use: the allow-list may have changed since the PATCH
                image = boot_image(uri, self.conf["boot_image_pattern"]) if uri else None
            except Fail:
                raise BackendError("Boot/HttpBootUri %r is not an allowed boot image (boot_image_pattern %s): "
                                   "not booted" % (uri, self.conf["boot_image_pattern"])) from None
        self.backend.power_on(container, image=image)
        self._booted(image)

    def _booted(self, image=None):
        with self._observe_lock:
            if image:
                self.save_settings(boot_image=image)
            row = self.store.system(self.name)
            values = {"last_power": "On", "last_reset": self.clock(), "boots": row["boots"] + 1,
                      "last_boot_target": row["boot_target"] if row["boot_enabled"] != "Disabled" else "None"}
            if row["boot_enabled"] == "Once":
                values["boot_enabled"] = "Disabled"
            self.store.update_system(self.name, **values)
            self.apply_pending_bios()
        self.power_event("On")

    def reset(self, reset_type):
        if reset_type not in self.conf["reset_types"]:
            raise Fail(400, "ActionParameterValueNotInList",
                       "The value '%s' for the parameter ResetType in the action ComputerSystem.Reset is not in "
                       "the list of acceptable values (%s)." % (reset_type, ", ".join(self.conf["reset_types"])),
                       "Choose a value from the enumeration list that the implementation can support and "
                       "resubmit the request if the operation failed.", args=[reset_type, "ResetType"])
        container = self.conf["container"]
        with self._state_lock:
            busy = self._transition
            if busy and reset_type != "ForceOff":
                raise Fail(409, "ResourceInUse", "The system is %s; ResetType %s is refused until that finishes "
                           "(ForceOff is accepted)." % (busy, reset_type),
                           "Wait until PowerState is On or Off, or use ForceOff.")
            if busy:
                self._cancel = True
        with self._power_lock:
            on = self.backend.is_on(container)
            if reset_type == "PushPowerButton":
                reset_type = "GracefulShutdown" if on else "On"
            if reset_type == "On":
                if not on:
                    self._power_on(container)
            elif reset_type == "ForceOff":
                self.backend.force_off(container)
                self._observe("Off")
            elif reset_type in ("ForceRestart", "PowerCycle", "FullPowerCycle") or (reset_type == "GracefulRestart" and not on):
                if on:
                    self.backend.force_off(container)
                self._power_on(container)
            elif reset_type in ("GracefulShutdown", "GracefulRestart"):
                if on:
                    self._start_graceful(reset_type == "GracefulRestart")
            elif reset_type == "Nmi" and not on:
                raise Fail(409, "ActionNotSupported", "Nmi needs a powered-on system.", args=["Nmi"])

    def _start_graceful(self, restart):
        container = self.conf["container"]
        with self._state_lock:
            self._transition, self._cancel = "PoweringOff", False

        def run():
            try:
                self.backend.graceful_shutdown(container)
                self._observe("Off")
                with self._state_lock:
                    go_on = restart and not self._cancel
                    if go_on:
                        self._transition = "PoweringOn"
                if go_on:
                    self._power_on(container)
            except BackendError as exc:
                self.last_error = str(exc)
                if self.log:
                    self.log("%s graceful %s failed: %s" % (self.name, "restart" if restart else "shutdown", exc))
            finally:
                with self._state_lock:
                    self._transition = None

        self._worker = threading.Thread(target=run, name="bmc-%s-graceful" % self.name, daemon=True)
        self._worker.start()

    def wait_idle(self, timeout=None):
        """Wait for a graceful shutdown/restart in flight (tests and service stop)."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)

    def watts(self, power_state):
        power = self.conf["power"]
        if power_state != "On":
            return round(power["standby_watts"], 1)
        return round(power["idle_watts"] * (1 + 0.03 * math.sin(self.clock() / 7.0)), 1)
