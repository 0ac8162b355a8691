-- SPDX-License-Identifier: GPL-3.0-or-later
-- Drives roles/slurmctld/files/job_submit.lua outside slurmctld: lua5.1 run_job_submit.lua <module> <case>
-- where <case> is a Lua expression {conf = {...}, job = {...}, now = N} (with modify = <job id>: a change of that
-- queued job, slurm_job_modify, instead of a submission); prints the translated request
-- (rc, licenses, comment, partition, begin_time) or the refusal (rc=refused, msg) one key=value a line.
local module, case = arg[1], arg[2]
local M = dofile(module)
local input = assert(loadstring("return " .. case))()
local ok, err
if input.modify then
  ok, err = pcall(M.modify, input.job, input.modify)
else
  ok, err = pcall(M.translate, input.conf, input.job, input.now)
end
if not ok then
  print("rc=refused")
  print("msg=" .. (type(err) == "table" and err.msg or tostring(err)))
  return
end
print("rc=" .. (err and "translated" or "untouched"))
for _, key in ipairs({"licenses", "comment", "partition", "begin_time", "dependency"}) do
  if input.job[key] ~= nil then print(key .. "=" .. tostring(input.job[key])) end
end
