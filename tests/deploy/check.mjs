// Offline checks of rendered manifests (the output of `kubectl kustomize`).
//
//   node check.mjs FILE.yaml...                 every check; exit 0 when all pass, 1 otherwise
//   node check.mjs --expect CHECK FILE.yaml...  negative test: exit 0 only if CHECK fails
//
// Two layers:
// - schema: each object is validated with the npm package kubernetes-models (types, required
//   fields, enums) by its apiVersion/kind; an object no model knows is an error unless another
//   check owns it (Kyverno's ClusterPolicy). kubernetes-models has no JobSet or LeaderWorkerSet:
//   their own fields are checked against a shape taken from their Go types (CRD_SHAPES), and the
//   Job and pod templates inside them with kubernetes-models' JobTemplateSpec and PodTemplateSpec.
// - the project's own rules, for what a schema cannot say (DESIGN.md, "Where it runs"), each with
//   a name that a failure line starts with: see CHECKS below. They hold the Jobs and pods inside a
//   JobSet or LeaderWorkerSet (the examples of cronjob/k8s/examples/, rendered with an overlay of
//   the base) as they hold the CronJob's, plus what ncclsmoke reads there ("jobset",
//   "leaderworkerset").
import { readFileSync } from "node:fs";
import { parseAllDocuments, parse as parseYaml } from "yaml";

const CHECKS = {
  "schema": "every object validates against its kubernetes-models type; a JobSet or LeaderWorkerSet against its Go types' fields, and its Job and pod templates against kubernetes-models' JobTemplateSpec and PodTemplateSpec",
  "job-restart-policy": "Job pods use restartPolicy Never (never Always; OnFailure would retry a rank in place)",
  "service-links": "every pod template sets enableServiceLinks: false",
  "indexed-job": "completionMode Indexed, parallelism == completions, backoffLimit 0",
  "world-size": "the world size the pods are told (NCCLSMOKE_PODS / WORLD_SIZE) equals completions (a JobSet's: the sum of replicas x completions; a LeaderWorkerSet's WORLD_SIZE, if set: its size)",
  "cronjob-schedule": "concurrencyPolicy Forbid, startingDeadlineSeconds below the period, history limits set",
  "deadline-vs-schedule": "activeDeadlineSeconds set, below the schedule's period, above the run's --timeout",
  "one-pod-per-node": "required pod anti-affinity (or a DoNotSchedule spread) on kubernetes.io/hostname matching the pods",
  "headless-service": "the pods' subdomain is a headless Service with publishNotReadyAddresses selecting them (a JobSet's own: enableDNSHostnames and publishNotReadyAddresses not turned off, no other subdomain in its pods)",
  "profiles": "the profiles ConfigMap is in the render and holds the profile the pods name, with a band for their world size at a size the sweep measures",
  "kyverno-policy": "the ClusterPolicy matches pods by label, turns service links off and adds NCCL defaults",
  "pod-security": "a Namespace of the render carries pod-security enforce/warn/audit labels at one level, and every pod in it meets that level (restricted: seccompProfile RuntimeDefault, runAsNonRoot, allowPrivilegeEscalation false, capabilities drop ALL, no host namespaces, ports or paths)",
  "labels": "in the smoke deployment's render (the smoke CronJob, or a JobSet or LeaderWorkerSet running ncclsmoke) every object and pod template carries app.kubernetes.io/{name,component,version,part-of,managed-by,instance}, the version being the project's",
  "network-policy": "a NetworkPolicy selects the smoke pods (the CronJob's, a JobSet's or LeaderWorkerSet's running ncclsmoke) and allows, between them, the store port, the pinned --mesh-port-range and the transports' ephemeral ports, and egress to DNS, the Pushgateway and the PostgreSQL history",
  "history-pdb": "a PodDisruptionBudget (maxUnavailable 0 or minAvailable = replicas) covers each one-replica StatefulSet; no budget selects nothing",
  "image-tag": "every image carries a digest or a versioned tag (never latest, cpu, gpu or none); ncclsmoke's tag starts with the project version",
  "no-password": "no Secret of the render holds a password, token or placeholder value, and no container gets one as a literal env value",
  "jobset": "a JobSet (jobset.x-k8s.io/v1alpha2) runs `ncclsmoke run` with MASTER_ADDR <jobset>-<first replicatedJob>-0-0.<subdomain> (its rank 0), MASTER_PORT a port, JOBSET_NAME, JOBSET_JOB_GLOBAL_INDEX and JOBSET_GLOBAL_REPLICAS from the downward API (label jobset.sigs.k8s.io/jobset-name, annotations jobset.sigs.k8s.io/job-global-index and global-replicas), NODE_NAME from spec.nodeName, the job token from a Secret; every replicatedJob has the same completions; pod host names fit 63 characters",
  "leaderworkerset": "a LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) runs `ncclsmoke run` with no MASTER_ADDR, RANK or LWS_* of its own (LWS injects LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX, and a template's value would win), MASTER_PORT a port if set, NODE_NAME from spec.nodeName, the job token from a Secret; size at least 2; pods restartPolicy Always (unset) and a group restartPolicy that recreates the whole group",
  "history": "the CronJob's history persists: NCCLSMOKE_HISTORY is a postgresql:// URL (from a Secret; a Service of the render behind it is a StatefulSet on a ReadWriteOnce claim), or a SQLite file on a ReadWriteOnce claim of a one-pod Job; never an emptyDir or a ReadWriteMany claim",
};

const failures = [];
const fail = (check, obj, msg) => {
  if (!(check in CHECKS)) throw new Error(`unknown check ${check}`);
  const where = obj ? `${obj.kind}/${obj.metadata?.name ?? "?"}` : "-";
  failures.push({ check, line: `FAIL [${check}] ${where}: ${msg}` });
};

// ---- input ------------------------------------------------------------------------------------
let expect = null;
const files = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--expect") {
    expect = argv[++i];
    if (!(expect in CHECKS)) {
      console.error(`check.mjs: --expect ${expect}: not a check (${Object.keys(CHECKS).join(", ")})`);
      process.exit(2);
    }
  } else if (argv[i] === "--list") {
    for (const [k, v] of Object.entries(CHECKS)) console.log(`${k}: ${v}`);
    process.exit(0);
  } else files.push(argv[i]);
}
if (files.length === 0) {
  console.error("usage: node check.mjs [--expect CHECK] FILE.yaml...");
  process.exit(2);
}
const objects = [];
for (const f of files) {
  let text;
  try {
    text = readFileSync(f, "utf8");
  } catch (e) {
    console.error(`check.mjs: cannot read ${f}: ${e.message}`);
    process.exit(2);
  }
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length) {
      console.error(`check.mjs: ${f}: YAML error: ${doc.errors[0].message}`);
      process.exit(2);
    }
    const o = doc.toJSON();
    if (o) objects.push(o);
  }
}
if (objects.length === 0) {
  console.error(`check.mjs: no objects in ${files.join(" ")}`);
  process.exit(2);
}

// ---- schema -----------------------------------------------------------------------------------
// The CRDs of the examples, which kubernetes-models does not know: their own fields, from their Go
// types' json tags (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go, kubernetes-sigs/lws
// api/leaderworkerset/v1/leaderworkerset_types.go). A shape is a type ("string", "integer",
// "boolean", "object" and "array" taken as they are, "int-or-string", "enum:A|B"), an object of
// fields (a trailing "!" marks a required one; any other field is an error, as the API server's
// structural schema would drop it), or [shape] for a list. "jobTemplate" and "podTemplate" are
// validated with kubernetes-models' JobTemplateSpec and PodTemplateSpec.
const CRD_SHAPES = {
  "jobset.x-k8s.io/v1alpha2/JobSet": {
    "apiVersion!": "string", "kind!": "string", "metadata!": "object", status: "object",
    "spec!": {
      "replicatedJobs!": [{
        "name!": "string", groupName: "string", "template!": "jobTemplate", replicas: "integer",
        dependsOn: [{ "name!": "string", "status!": "enum:Ready|Complete" }],
      }],
      network: { enableDNSHostnames: "boolean", subdomain: "string", publishNotReadyAddresses: "boolean" },
      successPolicy: { "operator!": "enum:All|Any", targetReplicatedJobs: ["string"] },
      failurePolicy: { maxRestarts: "integer", restartStrategy: "enum:Recreate|BlockingRecreate|InPlaceRestart", rules: "array" },
      startupPolicy: { "startupPolicyOrder!": "enum:AnyOrder|InOrder" },
      suspend: "boolean",
      coordinator: { "replicatedJob!": "string", jobIndex: "integer", podIndex: "integer" },
      managedBy: "string",
      ttlSecondsAfterFinished: "integer",
      volumeClaimPolicies: "array",
    },
  },
  "leaderworkerset.x-k8s.io/v1/LeaderWorkerSet": {
    "apiVersion!": "string", "kind!": "string", "metadata!": "object", status: "object",
    "spec!": {
      replicas: "integer",
      "leaderWorkerTemplate!": {
        leaderTemplate: "podTemplate",
        "workerTemplate!": "podTemplate",
        size: "integer",
        restartPolicy: "enum:Default|RecreateGroupOnPodRestart|RecreateGroupAfterStart|None",
        subGroupPolicy: { subGroupPolicyType: "enum:LeaderWorker|LeaderExcluded", subGroupSize: "integer" },
        volumeClaimTemplates: "array",
        persistentVolumeClaimRetentionPolicy: "object",
      },
      rolloutStrategy: {
        "type!": "enum:RollingUpdate",
        rollingUpdateConfiguration: { partition: "integer", maxUnavailable: "int-or-string", maxSurge: "int-or-string" },
      },
      startupPolicy: "enum:LeaderCreated|LeaderReady",
      networkConfig: { "subdomainPolicy!": "enum:Shared|UniquePerReplica" },
    },
  },
};
const TEMPLATE_MODELS = {
  jobTemplate: ["batch/v1", "JobTemplateSpec"],
  podTemplate: ["v1", "PodTemplateSpec"],
};
async function checkShape(o, v, shape, path) {
  const isObj = (x) => x !== null && typeof x === "object" && !Array.isArray(x);
  if (Array.isArray(shape)) {
    if (!Array.isArray(v)) return fail("schema", o, `${path} must be a list`);
    for (let i = 0; i < v.length; i++) await checkShape(o, v[i], shape[0], `${path}[${i}]`);
    return;
  }
  if (isObj(shape)) {
    if (!isObj(v)) return fail("schema", o, `${path} must be an object`);
    const fields = Object.fromEntries(Object.entries(shape).map(([k, s]) => [k.replace(/!$/, ""), [s, k.endsWith("!")]]));
    for (const [k, [s, required]] of Object.entries(fields)) {
      if (v[k] === undefined || v[k] === null) {
        if (required) fail("schema", o, `${path}.${k} is required`);
      } else await checkShape(o, v[k], s, `${path}.${k}`);
    }
    for (const k of Object.keys(v))
      if (!(k in fields)) fail("schema", o, `${path}.${k} is not a field of ${o.apiVersion} ${o.kind}`);
    return;
  }
  if (shape in TEMPLATE_MODELS) {
    const [group, kind] = TEMPLATE_MODELS[shape];
    const Model = (await import(`kubernetes-models/${group}/${kind}`))[kind];
    try {
      new Model(v).validate();
    } catch (e) {
      fail("schema", o, `${path} (${kind}): ${e.message}`);
    }
    return;
  }
  const ok = shape === "string" ? typeof v === "string"
    : shape === "integer" ? Number.isInteger(v)
      : shape === "boolean" ? typeof v === "boolean"
        : shape === "object" ? isObj(v)
          : shape === "array" ? Array.isArray(v)
            : shape === "int-or-string" ? Number.isInteger(v) || typeof v === "string"
              : shape.startsWith("enum:") ? shape.slice(5).split("|").includes(v) : false;
  if (!ok) fail("schema", o, `${path} is ${JSON.stringify(v)}, not ${shape.startsWith("enum:") ? "one of " + shape.slice(5) : "a" + (/^[aeiou]/.test(shape) ? "n " : " ") + shape}`);
}

const ownedElsewhere = new Set(["kyverno.io/v1/ClusterPolicy"]);
for (const o of objects) {
  if (!o.apiVersion || !o.kind) {
    fail("schema", o, "no apiVersion/kind");
    continue;
  }
  const key = `${o.apiVersion}/${o.kind}`;
  if (ownedElsewhere.has(key)) continue;
  if (key in CRD_SHAPES) {
    await checkShape(o, o, CRD_SHAPES[key], o.kind);
    continue;
  }
  if (o.kind === "JobSet" || o.kind === "LeaderWorkerSet") {
    fail("schema", o, `${key}: the checks know ${Object.keys(CRD_SHAPES).join(" and ")}`);
    continue;
  }
  let Model;
  try {
    Model = (await import(`kubernetes-models/${o.apiVersion}/${o.kind}`))[o.kind];
  } catch {
    fail("schema", o, `no kubernetes-models type for ${key}`);
    continue;
  }
  try {
    new Model(o).validate();
  } catch (e) {
    fail("schema", o, e.message);
  }
}

// ---- helpers ----------------------------------------------------------------------------------
const byKind = (k) => objects.filter((o) => o.kind === k);
// Every Job spec in the render: the CronJobs' job templates and the Jobs.
const jobs = [
  ...byKind("CronJob").map((c) => ({ owner: c, cron: c, spec: c.spec?.jobTemplate?.spec ?? {} })),
  ...byKind("Job").map((j) => ({ owner: j, cron: null, spec: j.spec ?? {} })),
  // A JobSet's replicatedJobs: each template is the spec of `replicas` Indexed Jobs.
  ...byKind("JobSet").flatMap((js) => (js.spec?.replicatedJobs ?? []).map((rj) =>
    ({ owner: js, cron: null, spec: rj.template?.spec ?? {}, jobset: js, rjob: rj }))),
];
// A JobSet's pods: every replicatedJob's replicas x completions (one rank each).
const jobsetPods = (js) => (js.spec?.replicatedJobs ?? [])
  .reduce((n, rj) => n + (rj.replicas ?? 1) * (rj.template?.spec?.completions ?? 1), 0);
// Its pods' subdomain: network.subdomain, else the JobSet's name (the headless Service it makes).
const jobsetSubdomain = (js) => js.spec?.network?.subdomain || js.metadata?.name;
// A LeaderWorkerSet's pod templates: the worker template, and the leader's when it has its own.
const lwsTemplates = (l) => [["workerTemplate", l.spec?.leaderWorkerTemplate?.workerTemplate],
  ["leaderTemplate", l.spec?.leaderWorkerTemplate?.leaderTemplate]].filter(([, t]) => t);
// A container whose command (+ args) is `ncclsmoke run ...` (ncclsmoke on PATH or a path to it).
const runsNcclsmoke = (c) => {
  const w = [...(c.command ?? []), ...(c.args ?? [])].map(String);
  return /(^|\/)ncclsmoke$/.test(w[0] ?? "") && w[1] === "run";
};
const podSpec = (j) => j.spec.template?.spec ?? {};
const podLabels = (j) => j.spec.template?.metadata?.labels ?? {};
const allContainers = (ps) => [...(ps.initContainers ?? []), ...(ps.containers ?? [])];
const envOf = (c, name) => (c.env ?? []).find((e) => e.name === name);
// A flag's value in a container's command + args ("--timeout 600" or "--timeout=600").
const flagValue = (c, flag) => {
  const words = [...(c.command ?? []), ...(c.args ?? [])];
  for (let i = 0; i < words.length; i++) {
    if (words[i] === flag && i + 1 < words.length) return words[i + 1];
    if (String(words[i]).startsWith(flag + "=")) return String(words[i]).slice(flag.length + 1);
  }
  return undefined;
};
const selects = (selector, labels) =>
  selector && Object.keys(selector).length > 0 &&
  Object.entries(selector).every(([k, v]) => labels[k] === v);
// Does a LabelSelector (matchLabels + matchExpressions In/Exists) select these labels?
const labelSelectorSelects = (sel, labels) => {
  if (!sel) return false;
  const ml = sel.matchLabels ?? {};
  const exprs = sel.matchExpressions ?? [];
  if (Object.keys(ml).length === 0 && exprs.length === 0) return false;
  if (!Object.entries(ml).every(([k, v]) => labels[k] === v)) return false;
  return exprs.every((e) =>
    e.operator === "In" ? (e.values ?? []).includes(labels[e.key])
      : e.operator === "Exists" ? e.key in labels
        : e.operator === "NotIn" ? !(e.values ?? []).includes(labels[e.key])
          : e.operator === "DoesNotExist" ? !(e.key in labels) : false);
};

// The shortest gap between two runs of a cron schedule, in seconds; null if not understood.
function cronPeriodSeconds(schedule) {
  const macros = { "@hourly": 3600, "@daily": 86400, "@midnight": 86400, "@weekly": 604800 };
  if (schedule in macros) return macros[schedule];
  const f = String(schedule).trim().split(/\s+/);
  if (f.length !== 5) return null;
  const [min, hour] = f;
  const minutes = expand(min, 60);
  if (!minutes) return null;
  const hours = expand(hour, 24);
  if (!hours) return null;
  // Every run time within a day, in minutes; the smallest gap, wrapping around the day.
  const times = [];
  for (const h of hours) for (const m of minutes) times.push(h * 60 + m);
  times.sort((a, b) => a - b);
  let gap = times[0] + 1440 - times[times.length - 1];
  for (let i = 1; i < times.length; i++) gap = Math.min(gap, times[i] - times[i - 1]);
  return gap * 60;
}
function expand(field, n) {
  const out = new Set();
  for (const part of field.split(",")) {
    let m;
    if (part === "*") for (let i = 0; i < n; i++) out.add(i);
    else if ((m = part.match(/^\*\/(\d+)$/))) for (let i = 0; i < n; i += Number(m[1])) out.add(i);
    else if ((m = part.match(/^(\d+)-(\d+)(?:\/(\d+))?$/)))
      for (let i = Number(m[1]); i <= Number(m[2]); i += Number(m[3] ?? 1)) out.add(i);
    else if ((m = part.match(/^(\d+)$/))) out.add(Number(m[1]));
    else return null;
  }
  if ([...out].some((v) => v >= n) || out.size === 0) return null;
  return [...out];
}

// Message sizes a sweep measures: min, min*factor, ... <= max (the harness's size syntax).
function parseSize(t) {
  const m = String(t).match(/^(\d+)(B|K|KiB|k|M|MiB|G|GiB)?$/);
  if (!m) return null;
  const mult = { B: 1, K: 1024, KiB: 1024, k: 1024, M: 1 << 20, MiB: 1 << 20, G: 2 ** 30, GiB: 2 ** 30 }[m[2] ?? "B"];
  return Number(m[1]) * mult;
}
function sweepSizes(min, max, factor) {
  const lo = parseSize(min), hi = parseSize(max);
  if (lo === null || hi === null || !(factor > 1)) return null;
  const out = [];
  for (let s = lo; s <= hi && out.length < 200; s = Math.round(s * factor)) out.push(s);
  return out;
}

// ---- our checks -------------------------------------------------------------------------------
// One pod per node: a required anti-affinity (or a DoNotSchedule spread) on the host name that
// selects the pod's own labels.
function onePodPerNode(o, ps, labels, what = "") {
  const anti = ps.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? [];
  const spread = ps.topologySpreadConstraints ?? [];
  const byAnti = anti.some((t) => t.topologyKey === "kubernetes.io/hostname" && labelSelectorSelects(t.labelSelector, labels));
  const bySpread = spread.some((t) => t.topologyKey === "kubernetes.io/hostname" && t.maxSkew === 1 &&
    t.whenUnsatisfiable === "DoNotSchedule" && labelSelectorSelects(t.labelSelector, labels));
  if (!byAnti && !bySpread)
    fail("one-pod-per-node", o, `${what}no required podAntiAffinity (or DoNotSchedule topologySpreadConstraint) on ` +
      "kubernetes.io/hostname selecting the pod's own labels: two ranks could share a node");
}

if (jobs.length === 0 && byKind("ClusterPolicy").length === 0 && byKind("LeaderWorkerSet").length === 0)
  fail("indexed-job", null, "the render holds no CronJob, Job, JobSet, LeaderWorkerSet or ClusterPolicy");

for (const j of jobs) {
  const o = j.owner;
  const ps = podSpec(j);
  const labels = podLabels(j);

  if (ps.restartPolicy !== "Never")
    fail("job-restart-policy", o, `restartPolicy is ${JSON.stringify(ps.restartPolicy)}, not Never`);
  for (const c of ps.initContainers ?? [])
    if (c.restartPolicy === "Always")
      fail("job-restart-policy", o, `init container ${c.name} has restartPolicy Always (a sidecar never ends)`);

  if (ps.enableServiceLinks !== false)
    fail("service-links", o, `enableServiceLinks is ${JSON.stringify(ps.enableServiceLinks)}, not false: ` +
      "a Service named master would inject MASTER_PORT=tcp://...");

  const s = j.spec;
  if (s.completionMode !== "Indexed")
    fail("indexed-job", o, `completionMode is ${JSON.stringify(s.completionMode)}, not Indexed`);
  if (!Number.isInteger(s.completions) || s.completions < 1)
    fail("indexed-job", o, `completions is ${JSON.stringify(s.completions)}`);
  if (s.parallelism !== s.completions)
    fail("indexed-job", o, `parallelism ${s.parallelism} != completions ${s.completions}: some ranks would wait for others to finish`);
  if (s.backoffLimit !== 0)
    fail("indexed-job", o, `backoffLimit is ${JSON.stringify(s.backoffLimit)}, not 0: a retried pod joins a rendezvous that is over`);

  // World size as the pods are told it: a Job's completions, a JobSet's every pod.
  const world = j.jobset ? jobsetPods(j.jobset) : s.completions;
  const worldWhat = j.jobset ? `the JobSet's replicas x completions is ${world}` : `completions is ${s.completions}`;
  let told = 0;
  for (const c of allContainers(ps)) {
    for (const name of ["NCCLSMOKE_PODS", "WORLD_SIZE"]) {
      const e = envOf(c, name);
      if (!e) continue;
      if (name === "WORLD_SIZE" && !(c.command ?? []).includes("ncclsmoke")) continue;
      told++;
      if (String(e.value) !== String(world))
        fail("world-size", o, `container ${c.name}: ${name}=${JSON.stringify(e.value)} but ${worldWhat}`);
    }
  }
  if (told === 0) fail("world-size", o, "no container is told the world size (NCCLSMOKE_PODS, or WORLD_SIZE for ncclsmoke)");

  // Deadlines.
  const deadline = s.activeDeadlineSeconds;
  if (!Number.isInteger(deadline) || deadline <= 0)
    fail("deadline-vs-schedule", o, `activeDeadlineSeconds is ${JSON.stringify(deadline)}: a hang would never end`);
  for (const c of allContainers(ps)) {
    // `run --gate` implies --timeout 100 unless given (harness/run/run_options.cpp).
    const t = flagValue(c, "--timeout") ??
      ([...(c.command ?? []), ...(c.args ?? [])].includes("--gate") ? "100" : undefined);
    if (t !== undefined && Number.isInteger(deadline) && !(Number(t) < deadline))
      fail("deadline-vs-schedule", o, `container ${c.name}: --timeout ${t} is not below activeDeadlineSeconds ${deadline}: the Job would kill the run before it writes its verdict`);
  }
  if (j.cron) {
    const c = j.cron.spec ?? {};
    const period = cronPeriodSeconds(c.schedule);
    if (period === null) fail("cronjob-schedule", o, `cannot tell the period of schedule ${JSON.stringify(c.schedule)}`);
    else if (Number.isInteger(deadline) && deadline >= period)
      fail("deadline-vs-schedule", o, `activeDeadlineSeconds ${deadline} is not below the schedule's period ${period} s`);
    if (c.concurrencyPolicy !== "Forbid")
      fail("cronjob-schedule", o, `concurrencyPolicy is ${JSON.stringify(c.concurrencyPolicy)}, not Forbid`);
    if (!Number.isInteger(c.startingDeadlineSeconds))
      fail("cronjob-schedule", o, "startingDeadlineSeconds is not set: a missed slot would run late, at any time");
    else if (period !== null && c.startingDeadlineSeconds >= period)
      fail("cronjob-schedule", o, `startingDeadlineSeconds ${c.startingDeadlineSeconds} is not below the period ${period} s`);
    for (const k of ["successfulJobsHistoryLimit", "failedJobsHistoryLimit"])
      if (!Number.isInteger(c[k])) fail("cronjob-schedule", o, `${k} is not set`);
  }

  onePodPerNode(o, ps, labels);

  // Headless Service for <job>-0.<subdomain>: a JobSet makes its own, named after it (network).
  if (j.jobset) {
    const net = j.jobset.spec?.network ?? {};
    if (net.enableDNSHostnames === false)
      fail("headless-service", o, "network.enableDNSHostnames is false: <jobset>-<job>-<index>-<pod>.<subdomain> will not resolve");
    if (net.publishNotReadyAddresses === false)
      fail("headless-service", o, "network.publishNotReadyAddresses is false: rank 0's name would not resolve until it is Ready");
    if (ps.subdomain && ps.subdomain !== jobsetSubdomain(j.jobset))
      fail("headless-service", o, `replicatedJob ${j.rjob.name}: the pods' subdomain ${ps.subdomain} is not the JobSet's ${jobsetSubdomain(j.jobset)}`);
  } else if (!ps.subdomain) fail("headless-service", o, "no subdomain: <job>-<index>.<service> will not resolve");
  else {
    const svc = byKind("Service").find((x) => x.metadata?.name === ps.subdomain);
    if (!svc) fail("headless-service", o, `subdomain ${ps.subdomain} names no Service in this render`);
    else {
      if (svc.spec?.clusterIP !== "None") fail("headless-service", svc, `clusterIP is ${JSON.stringify(svc.spec?.clusterIP)}, not None (headless)`);
      if (svc.spec?.publishNotReadyAddresses !== true)
        fail("headless-service", svc, "publishNotReadyAddresses is not true: rank 0's name would not resolve until it is Ready");
      if (!selects(svc.spec?.selector, labels))
        fail("headless-service", svc, `selector ${JSON.stringify(svc.spec?.selector)} does not select ${o.kind}/${o.metadata?.name}'s pods`);
      if (svc.metadata?.namespace !== o.metadata?.namespace)
        fail("headless-service", svc, `namespace ${svc.metadata?.namespace} differs from ${o.metadata?.namespace}`);
    }
  }

  // Profiles: ConfigMap present, the profile named exists in it.
  for (const c of allContainers(ps)) {
    const isSmoke = envOf(c, "NCCLSMOKE_PODS") || (c.command ?? []).includes("ncclsmoke");
    if (!isSmoke) continue;
    const profile = envOf(c, "NCCLSMOKE_PROFILE")?.value || flagValue(c, "--profile");
    const file = envOf(c, "NCCLSMOKE_PROFILES")?.value || flagValue(c, "--profiles") || "/etc/ncclsmoke/profiles.yaml";
    if (!profile) continue;
    const dir = file.slice(0, file.lastIndexOf("/"));
    const base = file.slice(file.lastIndexOf("/") + 1);
    const mount = (c.volumeMounts ?? []).find((m) => m.mountPath === dir);
    const vol = mount && (ps.volumes ?? []).find((v) => v.name === mount.name);
    const cmName = vol?.configMap?.name;
    const cm = cmName && byKind("ConfigMap").find((x) => x.metadata?.name === cmName);
    if (!cm) {
      fail("profiles", o, `container ${c.name}: ${file} is not a ConfigMap of this render mounted at ${dir}`);
      continue;
    }
    const text = cm.data?.[base];
    if (typeof text !== "string") {
      fail("profiles", cm, `has no key ${base}`);
      continue;
    }
    let profiles = [];
    try {
      profiles = parseYaml(text)?.profiles ?? [];
    } catch (e) {
      fail("profiles", cm, `${base} is not YAML: ${e.message}`);
      continue;
    }
    const p = profiles.find((x) => x.name === profile);
    if (!p) {
      fail("profiles", o, `container ${c.name}: profile ${profile} is not in ${cmName}/${base} (${profiles.map((x) => x.name).join(", ")})`);
      continue;
    }
    // Would the judge have what it needs? Else every run is inconclusive (BASELINE_MISSING).
    const pods = envOf(c, "NCCLSMOKE_PODS")?.value;
    const world = pods !== undefined
      ? Number(pods) * Number(envOf(c, "NCCLSMOKE_RANKS_PER_POD")?.value ?? 1)
      : Number(envOf(c, "WORLD_SIZE")?.value);
    const transports = String(envOf(c, "NCCLSMOKE_TRANSPORTS")?.value ?? flagValue(c, "--transports") ?? "socket").split(",");
    // `run --gate` without sweep flags measures exactly the profile band's gate size.
    const words = [...(c.command ?? []), ...(c.args ?? [])];
    const gateSweep = words.includes("--gate") &&
      ["--min-bytes", "--max-bytes", "--gate-bytes"].every((f) => flagValue(c, f) === undefined);
    const sizes = gateSweep ? null
      : sweepSizes(flagValue(c, "--min-bytes") ?? "1M", flagValue(c, "--max-bytes") ?? "64M",
        Number(flagValue(c, "--factor") ?? 2));
    for (const t of p.transports ?? []) {
      if (!transports.includes(t.transport)) {
        if (t.required !== false)
          fail("profiles", o, `container ${c.name}: profile ${profile} requires transport ${t.transport}, which the pods do not run (${transports.join(",")})`);
        continue;
      }
      const bands = t.baselines ?? [];
      const band = bands.find((b) => b.world_size === world) ?? bands.find((b) => !b.world_size);
      if (!band) {
        fail("profiles", o, `container ${c.name}: profile ${profile} has no ${t.transport} band for world size ${world} (${bands.map((b) => b.world_size).join(", ")}): every run would be inconclusive`);
        continue;
      }
      if (sizes && !sizes.includes(band.gate_bytes))
        fail("profiles", o, `container ${c.name}: the sweep never measures ${band.gate_bytes} bytes, the gate size of profile ${profile}'s ${t.transport} band (--min-bytes/--max-bytes/--factor)`);
    }
  }
}

// The run history (CronJobs: the smoke test; a gate Job keeps none). An emptyDir forgets every
// run; a ReadWriteMany claim is a network filesystem, where SQLite's WAL does not work; a
// ReadWriteOnce claim attaches to one node, so every pod that mounts it must be on that node.
const decode = (secret, key) =>
  secret?.stringData?.[key] ?? (secret?.data?.[key] !== undefined ? Buffer.from(secret.data[key], "base64").toString() : undefined);
for (const j of jobs.filter((x) => x.cron)) {
  const o = j.owner;
  const ps = podSpec(j);
  for (const c of allContainers(ps)) {
    if (!envOf(c, "NCCLSMOKE_PODS")) continue;
    const e = envOf(c, "NCCLSMOKE_HISTORY");
    if (!e || (!e.value && !e.valueFrom)) {
      fail("history", o, `container ${c.name}: no NCCLSMOKE_HISTORY: every run is forgotten (report and baseline learn see nothing)`);
      continue;
    }
    let url = e.value;
    if (e.valueFrom) {
      const ref = e.valueFrom.secretKeyRef;
      if (!ref) {
        fail("history", o, `container ${c.name}: NCCLSMOKE_HISTORY comes from ${JSON.stringify(e.valueFrom)}, not a Secret`);
        continue;
      }
      const secret = byKind("Secret").find((x) => x.metadata?.name === ref.name);
      if (!secret) continue;  // the operator's own Secret (components/history-postgres-external)
      url = decode(secret, ref.key);
      if (url === undefined) {
        fail("history", secret, `has no key ${ref.key} for NCCLSMOKE_HISTORY`);
        continue;
      }
    }
    const pg = String(url).match(/^postgres(?:ql)?:\/\/(?:[^@/]*@)?([^:/?]*)/);
    if (pg) {
      if (/^postgres(?:ql)?:\/\/[^/@]*:[^/@]*@/.test(url))
        fail("history", o, `container ${c.name}: the history URL holds a password; give it in PGPASSWORD from a Secret`);
      const svc = byKind("Service").find((x) => x.metadata?.name === pg[1].split(".")[0]);
      if (!svc) continue;  // a server outside this render
      const sts = byKind("StatefulSet").find((x) => selects(svc.spec?.selector, x.spec?.template?.metadata?.labels ?? {}));
      if (!sts) {
        fail("history", svc, `the history URL's Service ${svc.metadata.name} selects no StatefulSet of this render`);
        continue;
      }
      const claims = sts.spec?.volumeClaimTemplates ?? [];
      const mounted = (sts.spec?.template?.spec?.containers ?? []).flatMap((x) => x.volumeMounts ?? []).map((m) => m.name);
      const data = claims.filter((t) => mounted.includes(t.metadata?.name));
      if (data.length === 0)
        fail("history", sts, "the history server keeps its data on no volumeClaimTemplate: it is lost with the pod");
      for (const t of data)
        if (!(t.spec?.accessModes ?? []).every((m) => m === "ReadWriteOnce" || m === "ReadWriteOncePod"))
          fail("history", sts, `claim ${t.metadata.name} is ${JSON.stringify(t.spec?.accessModes)}, not ReadWriteOnce (a database on a network filesystem)`);
      if (sts.spec?.replicas !== 1)
        fail("history", sts, `replicas is ${sts.spec?.replicas}, not 1: two servers, two histories`);
      continue;
    }
    // A SQLite file: on which volume?
    const path = String(url);
    const mount = (c.volumeMounts ?? []).filter((m) => path.startsWith(m.mountPath.replace(/\/?$/, "/")))
      .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
    const vol = mount && (ps.volumes ?? []).find((v) => v.name === mount.name);
    if (!vol) {
      fail("history", o, `container ${c.name}: NCCLSMOKE_HISTORY=${path} is on no volume (the container's own filesystem)`);
      continue;
    }
    if (!vol.persistentVolumeClaim) {
      fail("history", o, `container ${c.name}: NCCLSMOKE_HISTORY=${path} is on volume ${vol.name} (${Object.keys(vol).filter((k) => k !== "name").join(",")}), not a PersistentVolumeClaim: the history is lost with the pod`);
      continue;
    }
    const pvc = byKind("PersistentVolumeClaim").find((x) => x.metadata?.name === vol.persistentVolumeClaim.claimName);
    if (!pvc) {
      fail("history", o, `claim ${vol.persistentVolumeClaim.claimName} is not in this render`);
      continue;
    }
    const modes = pvc.spec?.accessModes ?? [];
    if (!modes.every((m) => m === "ReadWriteOnce" || m === "ReadWriteOncePod"))
      fail("history", pvc, `accessModes ${JSON.stringify(modes)}: a ReadWriteMany claim is a network filesystem, where SQLite's WAL does not work; use ReadWriteOnce`);
    else if (j.spec.parallelism !== 1)
      fail("history", o, `a ReadWriteOnce claim (${pvc.metadata.name}) is mounted by ${j.spec.parallelism} pods on different nodes: all but one would hang in ContainerCreating (Multi-Attach); use the PostgreSQL history`);
    if (pvc.metadata?.namespace !== o.metadata?.namespace)
      fail("history", pvc, `namespace ${pvc.metadata?.namespace} differs from ${o.metadata?.namespace}`);
  }
}

// ---- JobSet and LeaderWorkerSet: what `ncclsmoke run` reads there (README "Launching it") ------
// Their Jobs and pods also go through the rules above and below (restart policy, service links,
// Indexed Jobs, world size, deadlines, one pod per node, Pod Security, labels, NetworkPolicy,
// images, secrets); these are the launcher's own variables.
const isPort = (v) => /^[0-9]{1,5}$/.test(String(v ?? "")) && Number(v) >= 1 && Number(v) <= 65535;
const fieldPathOf = (c, name) => envOf(c, name)?.valueFrom?.fieldRef?.fieldPath;
// The job token from a Secret (NCCLSMOKE_JOB_TOKEN), or a mounted file of one.
const tokenFromSecret = (c) => envOf(c, "NCCLSMOKE_JOB_TOKEN")?.valueFrom?.secretKeyRef ||
  envOf(c, "NCCLSMOKE_JOB_TOKEN_FILE") || flagValue(c, "--job-token-file") !== undefined;
const JOBSET_DOWNWARD = [
  ["JOBSET_NAME", "metadata.labels['jobset.sigs.k8s.io/jobset-name']"],
  ["JOBSET_JOB_GLOBAL_INDEX", "metadata.annotations['jobset.sigs.k8s.io/job-global-index']"],
  ["JOBSET_GLOBAL_REPLICAS", "metadata.annotations['jobset.sigs.k8s.io/global-replicas']"],
  ["NODE_NAME", "spec.nodeName"],
];
for (const js of byKind("JobSet")) {
  const name = js.metadata?.name ?? "";
  const rjs = js.spec?.replicatedJobs ?? [];
  const podSpecOf = (rj) => rj.template?.spec?.template?.spec ?? {};
  if (!rjs.some((rj) => allContainers(podSpecOf(rj)).some(runsNcclsmoke))) {
    fail("jobset", js, "no replicatedJob runs `ncclsmoke run`");
    continue;
  }
  // Rank 0 is pod 0 of Job 0 of the first replicatedJob: global Job indexes count in list order.
  const master = `${name}-${rjs[0]?.name}-0-0.${jobsetSubdomain(js)}`;
  const completions = [...new Set(rjs.map((rj) => rj.template?.spec?.completions))];
  if (completions.length > 1)
    fail("jobset", js, `the replicatedJobs' completions differ (${completions.join(", ")}): rank = JOBSET_JOB_GLOBAL_INDEX x ` +
      "(WORLD_SIZE / JOBSET_GLOBAL_REPLICAS) + JOB_COMPLETION_INDEX needs the same pod count in every Job");
  for (const rj of rjs) {
    // The last pod's host name, <jobset>-<replicatedJob>-<job index>-<pod index>: one DNS label.
    const host = `${name}-${rj.name}-${(rj.replicas ?? 1) - 1}-${(rj.template?.spec?.completions ?? 1) - 1}`;
    if (host.length > 63)
      fail("jobset", js, `replicatedJob ${rj.name}: the pod host name ${host} is ${host.length} characters, more than a DNS label's 63`);
    for (const c of allContainers(podSpecOf(rj)).filter(runsNcclsmoke)) {
      const where = `replicatedJob ${rj.name}, container ${c.name}`;
      const addr = envOf(c, "MASTER_ADDR")?.value ?? flagValue(c, "--master-addr");
      if (addr !== master)
        fail("jobset", js, `${where}: MASTER_ADDR is ${JSON.stringify(addr ?? null)}, not rank 0's ${master} (<jobset>-<first replicatedJob>-0-0.<subdomain>)`);
      const port = envOf(c, "MASTER_PORT")?.value ?? flagValue(c, "--master-port");
      if (!isPort(port)) fail("jobset", js, `${where}: MASTER_PORT is ${JSON.stringify(port ?? null)}, not a port 1-65535`);
      for (const [v, path] of JOBSET_DOWNWARD)
        if (fieldPathOf(c, v) !== path)
          fail("jobset", js, `${where}: ${v} is ${JSON.stringify(envOf(c, v) ?? null)}, not the downward API's fieldPath ${path}`);
      if (!tokenFromSecret(c)) fail("jobset", js, `${where}: NCCLSMOKE_JOB_TOKEN is not from a Secret (secretKeyRef)`);
    }
  }
}
const LWS_INJECTED = ["LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX"];
for (const l of byKind("LeaderWorkerSet")) {
  const lwt = l.spec?.leaderWorkerTemplate ?? {};
  const size = lwt.size ?? 1;
  const templates = lwsTemplates(l);
  if (!templates.some(([, t]) => allContainers(t.spec ?? {}).some(runsNcclsmoke))) {
    fail("leaderworkerset", l, "no pod template runs `ncclsmoke run`");
    continue;
  }
  if (!Number.isInteger(size) || size < 2)
    fail("leaderworkerset", l, `leaderWorkerTemplate.size is ${JSON.stringify(size)}: a group of one pod tests no path between nodes`);
  if (lwt.restartPolicy === "None" || lwt.restartPolicy === "Default")
    fail("leaderworkerset", l, `leaderWorkerTemplate.restartPolicy is ${lwt.restartPolicy}: a restarted pod would rejoin a rendezvous ` +
      "that is over; RecreateGroupOnPodRestart (the default) starts the whole group again");
  for (const [which, t] of templates) {
    const ps = t.spec ?? {};
    if (ps.restartPolicy !== undefined && ps.restartPolicy !== "Always")
      fail("leaderworkerset", l, `${which}: restartPolicy is ${ps.restartPolicy}: LWS runs its pods in StatefulSets, which take only Always`);
    if (ps.enableServiceLinks !== false)
      fail("service-links", l, `${which}: enableServiceLinks is ${JSON.stringify(ps.enableServiceLinks)}, not false: ` +
        "a Service named master would inject MASTER_PORT=tcp://...");
    onePodPerNode(l, ps, t.metadata?.labels ?? {}, `${which}: `);
    for (const c of allContainers(ps).filter(runsNcclsmoke)) {
      const where = `${which}, container ${c.name}`;
      for (const v of ["MASTER_ADDR", "RANK", ...LWS_INJECTED])
        if (envOf(c, v))
          fail("leaderworkerset", l, `${where}: sets ${v}: ncclsmoke reads the group from ${LWS_INJECTED.join(", ")}, which LWS injects (a value in the template wins over LWS's)`);
      for (const f of ["--master-addr", "--rank"])
        if (flagValue(c, f) !== undefined) fail("leaderworkerset", l, `${where}: passes ${f}: the group's leader and ranks come from LWS_*`);
      const ws = envOf(c, "WORLD_SIZE")?.value ?? flagValue(c, "--world-size");
      if (ws !== undefined && String(ws) !== String(size))
        fail("world-size", l, `${where}: WORLD_SIZE=${JSON.stringify(ws)} but the group's size is ${size}`);
      const port = envOf(c, "MASTER_PORT")?.value ?? flagValue(c, "--master-port");
      if (port !== undefined && !isPort(port)) fail("leaderworkerset", l, `${where}: MASTER_PORT is ${JSON.stringify(port)}, not a port 1-65535`);
      if (fieldPathOf(c, "NODE_NAME") !== "spec.nodeName")
        fail("leaderworkerset", l, `${where}: NODE_NAME is ${JSON.stringify(envOf(c, "NODE_NAME") ?? null)}, not the downward API's fieldPath spec.nodeName`);
      if (!tokenFromSecret(c)) fail("leaderworkerset", l, `${where}: NCCLSMOKE_JOB_TOKEN is not from a Secret (secretKeyRef)`);
    }
  }
}

// Kyverno ClusterPolicy: what we rely on, read structurally (no Kyverno CLI offline).
for (const p of byKind("ClusterPolicy")) {
  if (p.apiVersion !== "kyverno.io/v1") fail("kyverno-policy", p, `apiVersion ${p.apiVersion}, not kyverno.io/v1`);
  const rules = p.spec?.rules ?? [];
  if (rules.length === 0) fail("kyverno-policy", p, "no rules");
  for (const r of rules) {
    const anyOf = [...(r.match?.any ?? []), ...(r.match?.all ?? [])];
    const ok = anyOf.length > 0 && anyOf.every((m) => (m.resources?.kinds ?? []).includes("Pod") &&
      Object.keys(m.resources?.selector?.matchLabels ?? {}).length > 0);
    if (!ok) fail("kyverno-policy", p, `rule ${r.name}: must match kind Pod by a label selector (opt-in), not every pod`);
    if (!r.mutate) fail("kyverno-policy", p, `rule ${r.name}: not a mutate rule`);
  }
  const patches = rules.flatMap((r) => [r.mutate?.patchStrategicMerge, ...(r.mutate?.foreach ?? []).map((f) => f.patchStrategicMerge)]).filter(Boolean);
  if (!patches.some((x) => x.spec?.enableServiceLinks === false))
    fail("kyverno-policy", p, "no rule sets spec.enableServiceLinks: false");
  const envNames = patches.flatMap((x) => [...(x.spec?.containers ?? [])].flatMap((c) => (c.env ?? []).map((e) => e.name)));
  for (const need of ["NCCL_DEBUG", "NCCL_SOCKET_IFNAME"])
    if (!envNames.includes(need)) fail("kyverno-policy", p, `no rule adds ${need} to the containers`);
  for (const x of patches)
    for (const c of [...(x.spec?.containers ?? []), ...(x.spec?.initContainers ?? [])])
      for (const e of c.env ?? [])
        if ("value" in e) fail("kyverno-policy", p, `env ${e.name} is forced (value:), not a default (+(value):)`);
}

// ---- Pod Security, labels, NetworkPolicy, disruption budget, images, secrets ------------------
// The project's version, from deploy_test.sh (CMakeLists.txt); absent when check.mjs runs alone.
const version = process.env.NCCLSMOKE_VERSION || null;
// Every pod template of the render, with the object that owns it.
const pods = [];
for (const o of objects) {
  const t = o.kind === "CronJob" ? o.spec?.jobTemplate?.spec?.template
    : ["Job", "StatefulSet", "Deployment", "DaemonSet", "ReplicaSet"].includes(o.kind) ? o.spec?.template
      : o.kind === "Pod" ? o : null;
  if (t) pods.push({ owner: o, meta: t.metadata ?? {}, spec: t.spec ?? {} });
  if (o.kind === "JobSet")
    for (const rj of o.spec?.replicatedJobs ?? []) {
      const pt = rj.template?.spec?.template ?? {};
      pods.push({ owner: o, meta: pt.metadata ?? {}, spec: pt.spec ?? {} });
    }
  if (o.kind === "LeaderWorkerSet")
    for (const [, pt] of lwsTemplates(o)) pods.push({ owner: o, meta: pt.metadata ?? {}, spec: pt.spec ?? {} });
}

// Pod Security Admission, read as the admission controller reads it (the "restricted" and
// "baseline" rules the manifests can break).
const PSA = "pod-security.kubernetes.io/";
const LEVELS = ["privileged", "baseline", "restricted"];
function podSecurityProblems(level, ps) {
  const out = [];
  if (level === "privileged") return out;
  for (const k of ["hostNetwork", "hostPID", "hostIPC"]) if (ps[k]) out.push(`${k} is true`);
  for (const v of ps.volumes ?? []) if (v.hostPath) out.push(`volume ${v.name} is a hostPath`);
  const containers = allContainers(ps);
  for (const c of containers) {
    const sc = c.securityContext ?? {};
    if (sc.privileged) out.push(`container ${c.name} is privileged`);
    for (const p of c.ports ?? []) if (p.hostPort) out.push(`container ${c.name} uses hostPort ${p.hostPort}`);
    if (level !== "restricted") continue;
    if (sc.allowPrivilegeEscalation !== false) out.push(`container ${c.name}: allowPrivilegeEscalation is not false`);
    if (!(sc.capabilities?.drop ?? []).includes("ALL")) out.push(`container ${c.name}: capabilities do not drop ALL`);
    const added = (sc.capabilities?.add ?? []).filter((x) => x !== "NET_BIND_SERVICE");
    if (added.length) out.push(`container ${c.name} adds capabilities ${added.join(",")}`);
    if ((sc.runAsNonRoot ?? ps.securityContext?.runAsNonRoot) !== true) out.push(`container ${c.name}: runAsNonRoot is not true`);
    if ((sc.runAsUser ?? ps.securityContext?.runAsUser) === 0) out.push(`container ${c.name}: runAsUser is 0`);
    const seccomp = sc.seccompProfile?.type ?? ps.securityContext?.seccompProfile?.type;
    if (seccomp !== "RuntimeDefault" && seccomp !== "Localhost")
      out.push(`container ${c.name}: seccompProfile is ${JSON.stringify(seccomp)}, not RuntimeDefault`);
  }
  return out;
}
for (const ns of byKind("Namespace")) {
  const l = ns.metadata?.labels ?? {};
  const level = l[PSA + "enforce"];
  if (!LEVELS.includes(level)) {
    fail("pod-security", ns, `label ${PSA}enforce is ${JSON.stringify(level)}, not one of ${LEVELS.join(", ")}`);
    continue;
  }
  for (const mode of ["warn", "audit"])
    if (l[PSA + mode] !== level) fail("pod-security", ns, `label ${PSA}${mode} is ${JSON.stringify(l[PSA + mode])}, not the enforced ${level}`);
  if (level === "privileged") fail("pod-security", ns, "enforces privileged: no pod needs it; use restricted (or baseline, saying why)");
  for (const p of pods.filter((x) => x.owner.metadata?.namespace === ns.metadata?.name)) {
    // The smoke pods and the PostgreSQL pod: the RuntimeDefault profile whatever the level.
    if (level !== "restricted" && p.spec.securityContext?.seccompProfile?.type !== "RuntimeDefault")
      fail("pod-security", p.owner, "the pod's seccompProfile is not RuntimeDefault");
    for (const m of podSecurityProblems(level, p.spec))
      fail("pod-security", p.owner, `refused by Pod Security "${level}" (namespace ${ns.metadata.name}): ${m}`);
  }
}

// The smoke deployment: a render with the smoke CronJob, or a JobSet or LeaderWorkerSet running
// ncclsmoke (the examples beside it); the gate and the policy are examples for other people's
// objects, with their own labels.
const smokeCron = byKind("CronJob").filter((c) =>
  allContainers(c.spec?.jobTemplate?.spec?.template?.spec ?? {}).some((x) => envOf(x, "NCCLSMOKE_PODS")));
// Every smoke pod template: the CronJob's, and those of a JobSet or LeaderWorkerSet running
// `ncclsmoke run`; c is its ncclsmoke container.
const smokePods = [
  ...smokeCron.map((cron) => {
    const t = cron.spec.jobTemplate.spec.template;
    return { owner: cron, template: t, c: allContainers(t.spec ?? {}).find((x) => envOf(x, "NCCLSMOKE_PODS")) };
  }),
  ...byKind("JobSet").flatMap((js) => (js.spec?.replicatedJobs ?? []).map((rj) => rj.template?.spec?.template ?? {})
    .map((t) => ({ owner: js, template: t, c: allContainers(t.spec ?? {}).find(runsNcclsmoke) }))),
  ...byKind("LeaderWorkerSet").flatMap((l) => lwsTemplates(l)
    .map(([, t]) => ({ owner: l, template: t, c: allContainers(t.spec ?? {}).find(runsNcclsmoke) }))),
].filter((p) => p.c);
const RECOMMENDED = ["name", "component", "version", "part-of", "managed-by", "instance"].map((k) => "app.kubernetes.io/" + k);
if (smokePods.length) {
  const checkLabels = (o, labels, what) => {
    const missing = RECOMMENDED.filter((k) => !labels?.[k]);
    if (missing.length) fail("labels", o, `${what} lacks ${missing.join(", ")}`);
    const v = labels?.["app.kubernetes.io/version"];
    if (version && v && String(v) !== version) fail("labels", o, `${what}: app.kubernetes.io/version is ${v}, not the project's ${version}`);
  };
  for (const o of objects) checkLabels(o, o.metadata?.labels, "metadata");
  for (const p of pods) checkLabels(p.owner, p.meta.labels, "the pod template");
}

// NetworkPolicy: which rules let a peer reach a port.
const portCovers = (ports, port, protocol) => !ports || ports.length === 0 ||
  ports.some((p) => (p.protocol ?? "TCP") === protocol &&
    (p.port === undefined || (typeof p.port === "number" && port >= p.port && port <= (p.endPort ?? p.port))));
const rangeCovers = (ports, lo, hi, protocol) => {
  for (let x = lo; x <= hi; x++) if (!portCovers(ports, x, protocol)) return false;
  return true;
};
// peers: a rule's from/to; pred(peer) says whether that peer is the one we need. No peers = all.
const peersInclude = (peers, pred) => !peers || peers.length === 0 || peers.some(pred);
const selectsPods = (labels, ns) => (peer) => !peer.ipBlock && !peer.namespaceSelector &&
  labelSelectorSelects(peer.podSelector, labels) || (peer.podSelector && peer.namespaceSelector &&
    Object.keys(peer.namespaceSelector).length === 0 && labelSelectorSelects(peer.podSelector, labels)) ||
  (ns && !peer.ipBlock && peer.namespaceSelector?.matchLabels?.["kubernetes.io/metadata.name"] === ns &&
    (!peer.podSelector || Object.keys(peer.podSelector).length === 0 || labelSelectorSelects(peer.podSelector, labels)));
for (const { owner: cron, template: t, c } of smokePods) {
  const labels = t.metadata?.labels ?? {};
  const ns = cron.metadata?.namespace;
  const policies = byKind("NetworkPolicy").filter((p) => p.metadata?.namespace === ns &&
    labelSelectorSelects(p.spec?.podSelector, labels));
  if (policies.length === 0) {
    fail("network-policy", cron, "no NetworkPolicy selects the smoke pods: a default-deny namespace blocks every run");
    continue;
  }
  const ingress = policies.filter((p) => (p.spec.policyTypes ?? ["Ingress"]).includes("Ingress")).flatMap((p) => p.spec.ingress ?? []);
  const egress = policies.filter((p) => (p.spec.policyTypes ?? []).includes("Egress")).flatMap((p) => p.spec.egress ?? []);
  const allows = (rules, side, lo, hi, protocol, pred, what) => {
    if (!rules.some((r) => peersInclude(r[side], pred) && rangeCovers(r.ports, lo, hi, protocol)))
      fail("network-policy", cron, `no ${side === "from" ? "ingress" : "egress"} rule allows ${what} (${protocol} ${lo}${hi !== lo ? "-" + hi : ""})`);
  };
  const smoke = selectsPods(labels, ns);
  const store = Number(envOf(c, "MASTER_PORT")?.value ?? flagValue(c, "--master-port") ?? 29500);
  const mesh = flagValue(c, "--mesh-port-range");
  const between = [[store, store, "the store (MASTER_PORT)"], [32768, 60999, "the transports' ephemeral ports"]];
  if (!mesh) fail("network-policy", cron, "--mesh-port-range is not given: the mesh listens on ephemeral ports no policy can name apart from the transports'");
  else {
    const m = String(mesh).match(/^(\d+)(?:-(\d+))?$/);
    if (m) between.push([Number(m[1]), Number(m[2] ?? m[1]), "the mesh probe (--mesh-port-range)"]);
  }
  for (const [lo, hi, what] of between) {
    allows(ingress, "from", lo, hi, "TCP", smoke, `${what} from the smoke pods`);
    allows(egress, "to", lo, hi, "TCP", smoke, `${what} to the smoke pods`);
  }
  allows(egress, "to", 53, 53, "UDP", () => true, "DNS");
  const pgw = envOf(c, "NCCLSMOKE_PUSHGATEWAY")?.value;
  const pm = pgw && String(pgw).match(/^https?:\/\/[^/:]+(?::(\d+))?/);
  if (pm) allows(egress, "to", Number(pm[1] ?? (pgw.startsWith("https") ? 443 : 80)), Number(pm[1] ?? (pgw.startsWith("https") ? 443 : 80)), "TCP", () => true, "the Pushgateway");
  const h = envOf(c, "NCCLSMOKE_HISTORY");
  const ref = h?.valueFrom?.secretKeyRef;
  const url = ref ? decode(byKind("Secret").find((x) => x.metadata?.name === ref.name), ref.key) : h?.value;
  // The operator's own Secret (history-postgres-external): the URL is unknown, its port 5432.
  const pg = url === undefined && ref ? [null, "5432"] : String(url ?? "").match(/^postgres(?:ql)?:\/\/(?:[^@/]*@)?[^:/?]*(?::(\d+))?/);
  if (pg) allows(egress, "to", Number(pg[1] ?? 5432), Number(pg[1] ?? 5432), "TCP", () => true, "the PostgreSQL history");
}

// Disruption budgets: a one-replica StatefulSet (the history's database) is never evicted
// under a publish; a budget that selects nothing is left over from a removed server.
for (const sts of byKind("StatefulSet")) {
  const labels = sts.spec?.template?.metadata?.labels ?? {};
  const pdbs = byKind("PodDisruptionBudget").filter((p) => p.metadata?.namespace === sts.metadata?.namespace &&
    labelSelectorSelects(p.spec?.selector, labels));
  const replicas = sts.spec?.replicas ?? 1;
  if (replicas !== 1) continue;
  if (!pdbs.some((p) => p.spec?.maxUnavailable === 0 || p.spec?.maxUnavailable === "0%" || p.spec?.minAvailable === replicas || p.spec?.minAvailable === "100%"))
    fail("history-pdb", sts, "no PodDisruptionBudget with maxUnavailable 0 (or minAvailable 1) selects its pod: a node drain stops the database under a publish");
}
for (const p of byKind("PodDisruptionBudget"))
  if (!pods.some((x) => x.owner.metadata?.namespace === p.metadata?.namespace && labelSelectorSelects(p.spec?.selector, x.meta.labels ?? {})))
    fail("history-pdb", p, `selects no pod of this render (${JSON.stringify(p.spec?.selector)})`);

// Images: a digest or a version in the tag.
for (const p of pods)
  for (const c of allContainers(p.spec)) {
    const image = String(c.image ?? "");
    if (/@sha256:[0-9a-f]{64}$/.test(image)) continue;
    const slash = image.lastIndexOf("/");
    const colon = image.lastIndexOf(":");
    const tag = colon > slash ? image.slice(colon + 1) : "";
    const repo = colon > slash ? image.slice(0, colon) : image;
    if (!/\d+\.\d+/.test(tag))
      fail("image-tag", p.owner, `container ${c.name}: image ${JSON.stringify(image)} has ${tag ? "the mutable tag " + tag : "no tag"}: give a versioned tag or a digest (with imagePullPolicy ${c.imagePullPolicy ?? "default"}, nodes keep whatever they pulled first)`);
    else if (version && repo.split("/").pop() === "ncclsmoke" && !(tag === version || tag.startsWith(version + "-")))
      fail("image-tag", p.owner, `container ${c.name}: image ${image}'s tag is not the project's version ${version}`);
    if (c.imagePullPolicy && !["IfNotPresent", "Always", "Never"].includes(c.imagePullPolicy))
      fail("image-tag", p.owner, `container ${c.name}: imagePullPolicy ${c.imagePullPolicy}`);
  }

// Secrets: the repository ships none with a password, token or placeholder in it.
const SECRETISH = /pass(word)?|token|secret|credential|private|api[-_]?key/i;
for (const s of byKind("Secret")) {
  const keys = new Set([...Object.keys(s.data ?? {}), ...Object.keys(s.stringData ?? {})]);
  for (const k of keys) {
    const v = decode(s, k) ?? "";
    if (SECRETISH.test(k) && v !== "")
      fail("no-password", s, `key ${k} holds a value in the repository: the operator creates that Secret (kubectl create secret)`);
    else if (/change[-_ ]?me|changeme|placeholder|example-password/i.test(v))
      fail("no-password", s, `key ${k} holds the placeholder ${JSON.stringify(v)}`);
    else if (/^[a-z][a-z0-9+.-]*:\/\/[^/@]*:[^/@]+@/i.test(v))
      fail("no-password", s, `key ${k} is a URL with a password in it`);
  }
}
for (const p of pods)
  for (const c of allContainers(p.spec))
    for (const e of c.env ?? [])
      if (SECRETISH.test(e.name) && typeof e.value === "string" && e.value !== "")
        fail("no-password", p.owner, `container ${c.name}: env ${e.name} is a literal value, not from a Secret`);

// ---- result -----------------------------------------------------------------------------------
for (const f of failures) console.log(f.line);
const summary = `${objects.length} objects from ${files.join(" ")}`;
if (expect) {
  const hit = failures.some((f) => f.check === expect);
  console.log(hit ? `ok: check ${expect} caught the broken manifest (${summary})`
    : `NOT CAUGHT: check ${expect} passed on a manifest broken for it (${summary})`);
  process.exit(hit ? 0 : 1);
}
console.log(failures.length ? `${failures.length} problems in ${summary}` : `ok: ${summary}`);
process.exit(failures.length ? 1 : 0);
