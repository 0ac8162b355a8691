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
-- Keys written by hand in --comment (seed 004 §4.2: gw_num=2,gw_file=route.txt,gw_cleanup nam=1G,nam_nonvolatile gce,
-- or the msa: form msa.hpc.slurm_packjob writes) are read as the options they stand for, take the same checks and
-- licences (a licence the job asks itself is kept when it covers them) and are written again; any other key, a
-- nam_name (allocations are named after the job) and the delay keys are refused. A reservation msa_delay_<job> admits
-- only job <job>, at submission and on a change (slurm_job_modify), and a changed comment carries no MSA key.
-- The comment is the msa: form of module_utils/_jobopts.py (format_options/encode): the key order of its
-- HOOK_KEYS, values without white space, ';', '=' or ','. Site values (pool size, NAM capacity, modules and which
-- reach NAM/GCE) come from /etc/slurm/job_submit_msa.conf.lua, rendered from the inventory by msa.hpc.slurmctld.
local M = {}

M.CONFIG = "/etc/slurm/job_submit_msa.conf.lua"
M.NO_VAL = 4294967294
local GIB = 1073741824
local POWERS = {[""] = 0, K = 1, M = 2, G = 3, T = 4, P = 5, E = 6}
local KEYS = {"gw_num", "gw_file", "gw_plugin", "gw_cleanup", "nam_bytes", "nam_nonvolatile", "nam_device", "gce"}
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
    or string.sub(value, -1) == "/" or value == "." or string.sub(value, -2) == "/."
  for part in string.gmatch(value, "[^/]+") do if part == ".." then bad = true end end
  if bad then refuse(option, value, "not a usable file name (no '..', '~', blanks, ';', ',', '=')") end
  return value
end

-- the home directory of uid in the passwd file (nil when it has no line there)
function M.home_of(uid, passwd)
  local fh = uid and io.open(passwd or "/etc/passwd", "r")
  if not fh then return nil end
  local home
  for line in fh:lines() do
    local id, dir = string.match(line, "^[^:]*:[^:]*:(%d+):%d*:[^:]*:([^:]*):")
    if id and tonumber(id) == tonumber(uid) then home = dir break end
  end
  fh:close()
  return home
end

local function normpath(path)
  local parts = {}
  for part in string.gmatch(path, "[^/]+") do
    if part ~= "." then parts[#parts + 1] = part end
  end
  return "/" .. table.concat(parts, "/")
end

local function under(path, root)
  if root == nil or root == "" then return false end
  root = normpath(root)
  return root ~= "/" and (path == root or string.sub(path, 1, #root + 1) == root .. "/")
end

-- the rule of module_utils/node/userfile.py (resolve, check_lexically): the routing file, relative to the job's
-- working directory or absolute, lies inside the user's home or the job's working directory (only the working
-- directory for an account the controller does not know, as module_utils/node/userfile.job_record); the prolog checks
-- it again, after symbolic links, as the user
function M.user_path(conf, job_desc, option, value)
  path_ok(option, value)
  local workdir = job_desc.work_dir
  if string.sub(value, 1, 1) ~= "/" then
    if workdir == nil or workdir == "" then return value end
    value = workdir .. "/" .. value
  end
  local path = normpath(value)
  local parent = string.match(path, "^(.*)/[^/]*$")
  if parent == "" then parent = "/" end
  local home = M.home_of(job_desc.user_id, conf.passwd)
  if not under(parent, workdir) and not under(parent, home) then
    local roots = {}
    for _, root in ipairs({home or "", workdir or ""}) do if root ~= "" then roots[#roots + 1] = root end end
    refuse(option, value, string.format("outside the job user's home and the job's working directory (%s)",
      table.concat(roots, ", ")))
  end
  return path
end

-- a delay reservation (msa_delay_<job>, module_utils/node/delay_hooks.py) admits only the job it was made for
function M.check_reservation(reservation, job_id)
  if reservation == nil or reservation == "" then return end
  for name in string.gmatch(reservation, "[^,]+") do
    local owner = string.match(string.lower(name), "^%s*msa_delay_(.-)%s*$")
    if owner and owner ~= tostring(job_id) then
      refuse("reservation", reservation, string.format("%s is the delay switch's reservation of job %s only", name,
        owner))
    end
  end
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

-- an option adds its licence; a key of the comment too, unless the job asks that licence itself (msa.hpc.slurm_packjob
-- writes both): the hooks then bound the job by what Slurm granted it
local function add_licence(job_desc, name, count, by_hand)
  local current = job_desc.licenses
  local item = string.format("%s:%d", name, count)
  if current ~= nil and current ~= "" then
    for lic in string.gmatch(current, "[^,]+") do
      if string.match(lic, "^%s*([^:*]+)") == name then
        local asked = tonumber(string.match(lic, "[:*](%d+)%s*$") or "1")
        if by_hand and asked >= count then return end
        if by_hand then
          refuse("licenses", current, string.format("the comment asks %s, more than the job's %s", item, lic))
        end
        refuse("licenses", current, string.format("%s is asked by an MSA option already (%s)", name, item))
      end
    end
    job_desc.licenses = current .. "," .. item
  else
    job_desc.licenses = item
  end
end

-- Keys a user may write by hand in the comment (seed 004 §4.2: gw_num=2,gw_file=route.txt,gw_cleanup nam=100G, or
-- the msa: form): each becomes the option it stands for and takes the same checks; the comment is then written again
-- in the msa: form. Any other key is refused, and so are the keys only the controller sets.
M.COMMENT_OPTIONS = {
  gw_num = "gw_num", gw_file = "gw_file", gw_plugin = "gw_plugin", gw_cleanup = "gw_cleanup",
  nam = "network-attached-memory", nam_bytes = "network-attached-memory", nam_nonvolatile = "nam_nonvolatile",
  nam_device = "nam_device", gce = "global-collective-engine",
}
local BOOLEAN = {gw_cleanup = true, nam_nonvolatile = true, gce = true}
local FLAGS = {gw_cleanup = true, nam_nonvolatile = true}   -- may stand alone in a hand-written comment (_jobopts.FLAGS)
local NOT_BY_HAND = {
  nam_name = "the NAM allocation is named after the job (slurm-<job id>), never by the user",
}
-- the delay switch's keys, as --delay writes them and msa.hpc.slurm_packjob with its component's index: read only
-- beside the dependency they stand for (delay_hooks.py reserves nodes for them)
local DELAY_KEYS = {delay = true, delay_after = true, component = true}
local TRUE = {[""] = true, ["1"] = true, yes = true, ["true"] = true, on = true}
local FALSE = {["0"] = true, no = true, ["false"] = true, off = true}

local function known_list()
  local names = {}
  for key in pairs(M.COMMENT_OPTIONS) do names[#names + 1] = key end
  table.sort(names)
  return table.concat(names, ", ")
end

-- the keys of a comment, {key = value} (a flag written bare is ""); nil for a comment that carries none
function M.comment_keys(text)
  if text == nil or text == "" then return nil end
  local items, msa = {}, string.sub(text, 1, 4) == "msa:"
  if msa then
    for item in string.gmatch(string.sub(text, 5), "[^;]+") do items[#items + 1] = item end
  else
    for item in string.gmatch(text, "[^%s,]+") do items[#items + 1] = item end
  end
  local keys, words = {}, {}
  for _, item in ipairs(items) do
    local key, value = string.match(item, "^%s*([a-z][a-z0-9_]*)%s*=%s*(.-)%s*$")
    if not key and not msa and FLAGS[item] then key, value = item, "" end
    if key then
      if NOT_BY_HAND[key] then refuse("comment", text, key .. ": " .. NOT_BY_HAND[key]) end
      if not M.COMMENT_OPTIONS[key] and not (msa and DELAY_KEYS[key]) then
        refuse("comment", text, string.format("%s is not a key msa.hpc knows (keys: %s)", key, known_list()))
      end
      if keys[key] ~= nil then refuse("comment", text, key .. " is given twice") end
      keys[key] = value
    elseif msa then
      refuse("comment", text, string.format("%q is not key=value", item))
    else
      -- the hooks' reader finds a key anywhere in a word (x:gw_num=2): such a word is refused, not left for them
      for key in pairs(M.COMMENT_OPTIONS) do
        local at = 1
        while true do
          local i, j = string.find(item, key, at, true)
          if not i then break end
          local before, after = string.sub(item, i - 1, i - 1), string.sub(item, j + 1, j + 1)
          if not string.match(before, "[%w_%-]") and (after == "=" or (after == "" and FLAGS[key])) then
            refuse("comment", text, string.format("%q hides the key %s: write it alone, as %s=VALUE", item, key, key))
          end
          at = j + 1
        end
      end
      words[#words + 1] = item
    end
  end
  if next(keys) == nil then return nil end
  if #words > 0 then
    refuse("comment", text, string.format("a comment with MSA keys holds only them (not %q)", words[1]))
  end
  return keys
end

-- delay=M;delay_after=<job>[;component=I] of an msa: comment: only with the dependency --delay would have made
-- (after:<job>+M, after:<job> for 0) and one partition; moved from ``keys`` into ``extra``
local function comment_delay(conf, job_desc, keys, opts, extra, text)
  if keys.delay == nil and keys.delay_after == nil and keys.component == nil then return end
  if opts.delay then refuse("comment", text, "delay is also given as an option") end
  if keys.delay == nil or keys.delay_after == nil then
    refuse("comment", text, "delay and delay_after go together (as --delay with --dependency=after:<job> writes them)")
  end
  local minutes = whole("delay", keys.delay, 0, 525600)
  local after = keys.delay_after
  if not string.match(after, "^[1-9]%d*$") or #after > 10 then refuse("delay_after", after, "not a job id") end
  local wanted = minutes > 0 and string.format("after:%s+%d", after, minutes) or ("after:" .. after)
  if job_desc.dependency ~= wanted then
    refuse("delay_after", after, string.format("needs --dependency=%s (not %s)", wanted,
      tostring(job_desc.dependency or "none")))
  end
  local parts = partitions_of(conf, job_desc)
  if #parts ~= 1 then
    refuse("delay", keys.delay, "its nodes are reserved in one partition (not " .. table.concat(parts, ",") .. ")")
  end
  extra.delay, extra.delay_after = minutes, after
  if keys.component ~= nil then extra.component = whole("component", keys.component, 0, 4096) end
  keys.delay, keys.delay_after, keys.component = nil, nil, nil
end

-- the hand-written keys as the options they stand for (a key also given as an option is refused)
local function merge_comment(opts, keys, text)
  for key, value in pairs(keys) do
    local name = M.COMMENT_OPTIONS[key]
    if opts[name] ~= nil or (name == "nam_nonvolatile" and opts["network-attached-memory"]
        and not keys.nam and not keys.nam_bytes) then
      refuse("comment", text, key .. " is also given as an option")
    end
  end
  if keys.nam and keys.nam_bytes then refuse("comment", text, "nam and nam_bytes both given") end
  for key, value in pairs(keys) do
    local name = M.COMMENT_OPTIONS[key]
    if BOOLEAN[key] then
      if not TRUE[value] and not FALSE[value] then
        refuse(key, value, "not a boolean (1/0, yes/no, true/false, on/off)")
      end
      if TRUE[value] then
        opts[name] = key == "gce" and "enabled" or (key == "gw_cleanup" and "1" or "")
      end
    else
      if value == "" then refuse(key, value, "empty") end
      opts[name] = value
    end
  end
  if opts.nam_nonvolatile then
    if not opts["network-attached-memory"] then refuse("nam_nonvolatile", "1", "given without nam") end
    opts["network-attached-memory"] = opts["network-attached-memory"] .. ":nonvolatile"
    opts.nam_nonvolatile = nil
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
  for _, key in ipairs({"delay", "delay_after", "component"}) do
    if extra[key] ~= nil then items[#items + 1] = key .. "=" .. tostring(extra[key]) end
  end
  return "msa:" .. table.concat(items, ";")
end

-- Check and translate the request in place; raises {msg=...} on a refusal.
function M.translate(conf, job_desc, now)
  M.check_reservation(job_desc.reservation, job_desc.job_id)
  local opts = M.options(job_desc)
  local keys = M.comment_keys(job_desc.comment)
  if next(opts) == nil and keys == nil then return false end
  local offset = job_desc.het_job_offset
  local leader = offset == nil or offset == M.NO_VAL or offset == 0
  local fields, extra, by_hand = {}, {}, {}
  local existing = job_desc.comment
  if keys then
    local given = {}
    for name in pairs(opts) do given[name] = true end
    comment_delay(conf, job_desc, keys, opts, extra, job_desc.comment)
    merge_comment(opts, keys, job_desc.comment)
    for name in pairs(opts) do by_hand[name] = not given[name] end
    existing = nil   -- every key of it is written again below
  end

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
    add_licence(job_desc, conf.gateway_license, n, by_hand.gw_num)
  end
  for _, key in ipairs({"gw_file", "gw_plugin", "gw_cleanup"}) do
    if opts[key] and not opts.gw_num then refuse(key, opts[key], "needs --gw_num") end
  end
  if opts.gw_file then fields.gw_file = M.user_path(conf, job_desc, "gw_file", opts.gw_file) and opts.gw_file end
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
  -- a heterogeneous job's leader (offset 0) may reach the NAM through another component, which this call does not see
  if (nam or gce) and offset ~= 0 then
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
    add_licence(job_desc, conf.nam_license, units, by_hand["network-attached-memory"])
  end
  if opts.nam_device then
    if not nam then refuse("nam_device", opts.nam_device, "given without NAM (nam=SIZE)") end
    fields.nam_device = bare("nam_device", opts.nam_device, "^[%w_-]+$", "not a bare name (letters, digits, '_', '-')")
  end
  if gce then
    if conf.gce_communicators < 1 then refuse("global-collective-engine", "enabled", "the system has no GCE") end
    fields.gce = 1
    add_licence(job_desc, conf.gce_license, 1, by_hand["global-collective-engine"])
  end
  if next(fields) ~= nil or next(extra) ~= nil or keys then
    job_desc.comment = M.comment(existing, fields, extra)
  end
  return true
end

function M.load_config(path)
  return dofile(path or M.CONFIG)
end

-- A change of a queued job (scontrol update): its delay reservation only for itself, and no MSA key in a new comment
-- (the licences and the checks of the options are made at submission). Raises {msg=...} on a refusal.
function M.modify(job_desc, job_id)
  M.check_reservation(job_desc.reservation, job_id)
  local keys = M.comment_keys(job_desc.comment)
  if keys ~= nil then
    local names = {}
    for key in pairs(keys) do names[#names + 1] = key end
    table.sort(names)
    refuse("comment", job_desc.comment, string.format("%s: MSA options are given at submission, not changed later",
      table.concat(names, ", ")))
  end
  return true
end

-- the plugin's entry points, when loaded by slurmctld (the global "slurm" table is there)
if type(slurm) == "table" and slurm.SUCCESS ~= nil then
  local conf = M.load_config()
  local function run(func, uid, ...)
    local ok, err = pcall(func, ...)
    if ok then return slurm.SUCCESS end
    local msg = type(err) == "table" and err.msg or ("msa options: " .. tostring(err))
    slurm.log_user("%s", msg)   -- slurm.log_user formats: a "%" in the user's words is text
    slurm.log_info("job_submit/msa: uid %s refused: %s", tostring(uid), msg)
    return slurm.ERROR
  end
  function slurm_job_submit(job_desc, part_list, submit_uid)  -- luacheck: ignore
    return run(M.translate, submit_uid, conf, job_desc)
  end
  function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)  -- luacheck: ignore
    return run(M.modify, modify_uid, job_desc, job_rec and job_rec.job_id)
  end
end

return M
