-- SPDX-License-Identifier: GPL-3.0-or-later
-- job_submit/lua of msa.hpc (JobSubmitPlugins=lua): turns the MSA options of sbatch/salloc/srun, which the SPANK
-- plugin spank_msa.so hands over as job-control variables (the request's spank_job_env, SPANK_MSA_*), into what
-- Slurm and the controller's hooks act on, or refuses the request before it is queued:
--   --gw_num=N                       licence gateway:N, comment gw_num=N   (psgwd hook, module_utils/node/gw_hooks.py)
--   --gw_file/--gw_plugin/--gw_cleanup  comment gw_file=, gw_plugin=, gw_cleanup=1
--   --network-attached-memory=S[:nonvolatile]  licence nam:<GiB rounded up>, comment nam_bytes=, nam_nonvolatile=1
--   --global-collective-engine       licence gce:1 (one of the 256 communicators of a GCE), comment gce=1
--   --module-list=m1,m2              the job's partition list: Slurm runs it in whichever starts it first
--   --delay=M                        with --dependency=after:<job>: after:<job>+M (M minutes after that job
--                                    started), comment delay=M;delay_after=<job>, and the controller's delay hook
--                                    reserves its nodes for that time when <job> starts (one partition only);
--                                    else a begin time M minutes after submission, comment delay=M
-- The comment is the msa: form of module_utils/_jobopts.py (format_options/encode): the key order of its
-- HOOK_KEYS, values without white space, ';', '=' or ','. Site values (pool size, NAM capacity, modules and which
-- reach NAM/GCE) come from /etc/slurm/job_submit_msa.conf.lua, rendered from the inventory by msa.hpc.slurmctld.
local M = {}

M.CONFIG = "/etc/slurm/job_submit_msa.conf.lua"
M.NO_VAL = 4294967294
local GIB = 1073741824
local POWERS = {[""] = 0, K = 1, M = 2, G = 3, T = 4, P = 5, E = 6}
local KEYS = {"gw_num", "gw_file", "gw_plugin", "gw_cleanup", "nam_bytes", "nam_nonvolatile", "gce"}
local NAMES = {
  MSA_GW_NUM = "gw_num", MSA_GW_FILE = "gw_file", MSA_GW_PLUGIN = "gw_plugin", MSA_GW_CLEANUP = "gw_cleanup",
  MSA_GW_ENV = "gw_env", MSA_DELAY = "delay", MSA_MODULE_LIST = "module-list",
  MSA_NAM = "network-attached-memory", MSA_GCE = "global-collective-engine",
}

local function refuse(option, value, why)
  error({msg = string.format("--%s=%s: %s", option, value, why)}, 0)
end

-- the SPANK_MSA_* variables of the request → {option name = value}
function M.options(job_desc)
  local out, env = {}, job_desc.spank_job_env
  if type(env) ~= "table" then return out end
  for _, item in pairs(env) do
    local key, value = string.match(tostring(item), "^([A-Z_]+)=(.*)$")
    if key then
      key = string.gsub(key, "^SPANK_", "")
      if NAMES[key] then out[NAMES[key]] = value end
    end
  end
  return out
end

local function whole(option, value, lo, hi)
  if not string.match(value, "^%d+$") or #value > 6 then
    refuse(option, value, string.format("not a whole number from %d to %d", lo, hi))
  end
  local n = tonumber(value)
  if n < lo or n > hi then refuse(option, value, string.format("not a whole number from %d to %d", lo, hi)) end
  return n
end

-- SIZE as module_utils/_sizes.py reads it (powers of 1024, K/M/G/T/P/E, optional i and B), whole bytes > 0
function M.size(option, value)
  local text = string.match(value, "^([^:]*)") or ""
  local num, unit, i, b = string.match(string.upper(text), "^(%d+)([KMGTPE]?)(I?)(B?)$")
  if not num or (i ~= "" and unit == "") or #num > 18 then
    refuse(option, value, "not a size (a number with K, M, G or T, powers of 1024)")
  end
  local bytes = tonumber(num) * 2 ^ (10 * POWERS[unit])
  if bytes < 1 then refuse(option, value, "not a positive size") end
  return bytes
end

local function bare(option, value, pattern, why)
  if not string.match(value, pattern) or #value > 1024 then refuse(option, value, why) end
  return value
end

local function path_ok(option, value)
  local bad = #value == 0 or #value > 1024 or string.find(value, "[%s;,=%z]") or string.sub(value, 1, 1) == "~"
    or string.sub(value, -1) == "/"
  for part in string.gmatch(value, "[^/]+") do if part == ".." then bad = true end end
  if bad then refuse(option, value, "not a usable file name (no '..', '~', blanks, ';', ',', '=')") end
  return value
end

local function split(text)
  local out = {}
  for item in string.gmatch(text, "[^,]+") do out[#out + 1] = item end
  return out
end

local function reaches(conf, partitions)
  for _, part in ipairs(partitions) do
    if not conf.extoll_partitions[part] then return false, part end
  end
  return true
end

local function partitions_of(conf, job_desc)
  local text = job_desc.partition
  if text == nil or text == "" then text = conf.default_partition end
  return split(text)
end

local function add_licence(job_desc, name, count)
  local current = job_desc.licenses
  local item = string.format("%s:%d", name, count)
  if current ~= nil and current ~= "" then
    for lic in string.gmatch(current, "[^,]+") do
      if string.match(lic, "^([^:]+)") == name then
        refuse("licenses", current, string.format("%s is asked by an MSA option already (%s)", name, item))
      end
    end
    job_desc.licenses = current .. "," .. item
  else
    job_desc.licenses = item
  end
end

-- the comment's msa: fields, in _jobopts.HOOK_KEYS order, then the extras
function M.comment(existing, fields, extra)
  local items = {}
  if existing ~= nil and existing ~= "" then
    if string.sub(existing, 1, 4) ~= "msa:" then
      refuse("comment", existing, "the comment carries the MSA options; give them as options, not in --comment")
    end
    for item in string.gmatch(string.sub(existing, 5), "[^;]+") do
      local key = string.match(item, "^%s*([a-z][a-z0-9_]*)%s*=")
      if key and (fields[key] ~= nil or extra[key] ~= nil) then
        refuse("comment", existing, key .. " is also given as an option")
      end
      items[#items + 1] = item
    end
  end
  for _, key in ipairs(KEYS) do
    if fields[key] ~= nil then items[#items + 1] = key .. "=" .. tostring(fields[key]) end
  end
  for _, key in ipairs({"delay", "delay_after"}) do
    if extra[key] ~= nil then items[#items + 1] = key .. "=" .. tostring(extra[key]) end
  end
  return "msa:" .. table.concat(items, ";")
end

-- Check and translate the request in place; raises {msg=...} on a refusal.
function M.translate(conf, job_desc, now)
  local opts = M.options(job_desc)
  if next(opts) == nil then return false end
  local offset = job_desc.het_job_offset
  local leader = offset == nil or offset == M.NO_VAL or offset == 0
  local fields, extra = {}, {}

  if opts["module-list"] then
    local v, parts = opts["module-list"], {}
    for _, module in ipairs(split(v)) do
      local part = conf.modules[module]
      if not part then
        local known = {}
        for name in pairs(conf.modules) do known[#known + 1] = name end
        table.sort(known)
        refuse("module-list", v, string.format("no module %s (modules: %s)", module, table.concat(known, ", ")))
      end
      parts[#parts + 1] = part
    end
    if job_desc.partition ~= nil and job_desc.partition ~= "" then
      refuse("module-list", v, "give either --module-list or --partition (" .. job_desc.partition .. ")")
    end
    job_desc.partition = table.concat(parts, ",")
  end
  if opts.delay then
    local minutes = whole("delay", opts.delay, 0, 525600)
    extra.delay = minutes
    -- after the start of another job (a workflow's first part, seed 004 §5.2.2): Slurm's after:<job>+<minutes>
    local after = job_desc.dependency and string.match(job_desc.dependency, "^after:(%d+)$")
    if after then
      -- the controller's delay hook reserves this job's nodes for that time when the leader starts: one partition
      local parts = partitions_of(conf, job_desc)
      if #parts ~= 1 then
        refuse("delay", opts.delay, "its nodes are reserved in one partition (not " .. table.concat(parts, ",") .. ")")
      end
      -- Slurm refuses after:<job>+0 ("Job dependency problem"): no delay is plain after:<job>
      job_desc.dependency = minutes > 0 and string.format("after:%s+%d", after, minutes) or ("after:" .. after)
      extra.delay_after = after
    elseif job_desc.dependency ~= nil and job_desc.dependency ~= "" then
      refuse("delay", opts.delay, "combines only with --dependency=after:<job> (not " .. job_desc.dependency .. ")")
    elseif minutes > 0 then
      job_desc.begin_time = (now or os.time()) + 60 * minutes
    end
  end
  if not leader then return true end

  if opts.gw_num then
    local n = whole("gw_num", opts.gw_num, 1, 4096)
    if n > conf.gateways then
      refuse("gw_num", opts.gw_num, string.format("the gateway pool has %d gateway%s", conf.gateways,
        conf.gateways == 1 and "" or "s"))
    end
    fields.gw_num = n
    add_licence(job_desc, conf.gateway_license, n)
  end
  for _, key in ipairs({"gw_file", "gw_plugin", "gw_cleanup"}) do
    if opts[key] and not opts.gw_num then refuse(key, opts[key], "needs --gw_num") end
  end
  if opts.gw_file then fields.gw_file = path_ok("gw_file", opts.gw_file) end
  if opts.gw_plugin then
    fields.gw_plugin = bare("gw_plugin", opts.gw_plugin, "^[%w_-]+$", "not a bare name (letters, digits, '_', '-')")
  end
  if opts.gw_cleanup then fields.gw_cleanup = 1 end
  if opts.gw_env then
    bare("gw_env", opts.gw_env, "^[%a_][%w_]*=[^%s;]*$", "not VAR=VALUE[,VAR=VALUE...]")
  end

  local gce = opts["global-collective-engine"]
  if gce ~= nil and gce ~= "enabled" and gce ~= "disabled" and gce ~= "" then
    refuse("global-collective-engine", gce, "neither enabled nor disabled")
  end
  gce = gce == "enabled" or gce == ""
  local nam = opts["network-attached-memory"]
  if nam or gce then
    local option, value = "network-attached-memory", nam
    if not nam then option, value = "global-collective-engine", opts["global-collective-engine"] end
    local parts = partitions_of(conf, job_desc)
    local ok, part = reaches(conf, parts)
    if not ok then
      refuse(option, value, string.format("partition %s is not on the EXTOLL fabric (NAM and GCE: %s)", part,
        conf.extoll_list))
    end
  end
  if nam then
    local size = M.size("network-attached-memory", nam)
    local flag = string.match(nam, ":(.*)$")
    if flag ~= nil and flag ~= "nonvolatile" and flag ~= "volatile" then
      refuse("network-attached-memory", nam, "the flag after ':' is not nonvolatile")
    end
    local units = math.ceil(size / GIB)
    if units > conf.nam_gib then
      refuse("network-attached-memory", nam, string.format("the NAM offers %d GiB", conf.nam_gib))
    end
    fields.nam_bytes = string.format("%d", size)
    if flag == "nonvolatile" then fields.nam_nonvolatile = 1 end
    add_licence(job_desc, conf.nam_license, units)
  end
  if gce then
    if conf.gce_communicators < 1 then refuse("global-collective-engine", "enabled", "the system has no GCE") end
    fields.gce = 1
    add_licence(job_desc, conf.gce_license, 1)
  end
  if next(fields) ~= nil or next(extra) ~= nil then
    job_desc.comment = M.comment(job_desc.comment, fields, extra)
  end
  return true
end

function M.load_config(path)
  return dofile(path or M.CONFIG)
end

-- the plugin's entry points, when loaded by slurmctld (the global "slurm" table is there)
if type(slurm) == "table" and slurm.SUCCESS ~= nil then
  local conf = M.load_config()
  local function run(job_desc)
    local ok, err = pcall(M.translate, conf, job_desc)
    if ok then return slurm.SUCCESS end
    local msg = type(err) == "table" and err.msg or ("msa options: " .. tostring(err))
    slurm.log_user(msg)
    slurm.log_info("job_submit/msa: uid %s refused: %s", tostring(job_desc.user_id), msg)
    return slurm.ERROR
  end
  function slurm_job_submit(job_desc, part_list, submit_uid)  -- luacheck: ignore
    return run(job_desc)
  end
  function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)  -- luacheck: ignore
    return slurm.SUCCESS
  end
end

return M
