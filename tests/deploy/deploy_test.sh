#!/bin/bash
# Offline tests of cronjob/'s Kubernetes manifests, gate example and Kyverno policy.
#
#   deploy_test.sh SOURCE_DIR npm-ci CACHE_DIR     install tests/deploy's node packages (npm ci)
#                                                  when node_modules is absent or stale
#   deploy_test.sh SOURCE_DIR render TARGET [WITH...]
#                                                  kubectl kustomize cronjob/TARGET (and each
#                                                  cronjob/WITH, checked together with it: an example
#                                                  of k8s/examples/ with the overlay it sits beside),
#                                                  then check.mjs (kubernetes-models schema + our rules)
#   deploy_test.sh SOURCE_DIR broken FILE          a broken copy: TARGET (named in FILE) with FILE
#                                                  as a kustomize patch must fail FILE's check. FILE's
#                                                  header: '# target: DIR', '# check: NAME', and
#                                                  optionally '# with: DIR' (rendered beside it, as
#                                                  render's WITH) and '# patch-target: KIND/NAME'
#                                                  (FILE is then a JSON patch of that object: a CRD's
#                                                  lists have no merge keys for a strategic merge)
#   deploy_test.sh SOURCE_DIR history              the history persists by default (PostgreSQL on a
#                                                  ReadWriteOnce claim); components history-pvc (one
#                                                  pod, RWO) and history-postgres-external render and
#                                                  check; an RWO claim on 4 pods and an RWX claim fail
#   deploy_test.sh SOURCE_DIR yamllint             yamllint -c cronjob/.yamllint on the sources
#   deploy_test.sh SOURCE_DIR profiles-copy        base/profiles.yaml == results/judging/profiles.example.yaml
#   deploy_test.sh SOURCE_DIR shellcheck           shellcheck -s sh cronjob/entrypoint.sh
#   deploy_test.sh SOURCE_DIR gate-command BIN    the gate's init container command, taken from the
#                                                  rendered Job, run for real with one rank here (no
#                                                  GPU): flags parse, the gate profile loads, and the
#                                                  skipped nccl transport fails closed (exit 4)
#   deploy_test.sh SOURCE_DIR image                the Dockerfiles install the entrypoint where the
#                                                  manifests' command finds it
# kubectl is the pinned one `scripts/install-deps.sh test` installs (/opt/ncclsmoke-test-tools/
# kubectl; NCCLSMOKE_KUBECTL overrides), never whatever kubectl is on PATH: its kustomize decides
# what renders. A tool that is absent (kubectl, node, npm, yamllint, shellcheck) fails the test,
# naming it and the install step.
set -u
src=$1 mode=$2
shift 2
here=$src/tests/deploy
cronjob=$src/cronjob
# The project's version (CMakeLists.txt's project()): check.mjs holds the labels and the image
# tags to it.
NCCLSMOKE_VERSION=$(sed -n 's/^project(ncclsmoke VERSION \([0-9][0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$NCCLSMOKE_VERSION" ] || { echo "FAIL: no project(ncclsmoke VERSION ...) in $src/CMakeLists.txt"; exit 1; }
export NCCLSMOKE_VERSION

kubectl=${NCCLSMOKE_KUBECTL:-/opt/ncclsmoke-test-tools/kubectl}
need() {
  command -v "$1" >/dev/null 2>&1 ||
    { echo "FAIL: $1 is not installed ($2; scripts/install-deps.sh test installs it)"; exit 1; }
}
need_node_modules() {
  need node "Debian/nodesource nodejs"
  [ -d "$here/node_modules/kubernetes-models" ] && [ -d "$here/node_modules/yaml" ] && return
  echo "FAIL: $here/node_modules is missing: run the deploy_npm_ci test (or: cd tests/deploy && npm ci)"
  exit 1
}
tmpdir() {
  tmp=$(mktemp -d /tmp/ncclsmoke-deploy.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
}
# render DIR OUT: kubectl kustomize, offline.
render() {
  if ! "$kubectl" kustomize "$1" >"$2" 2>"$tmp/kustomize.err"; then
    echo "FAIL: kubectl kustomize $1:"
    sed 's/^/    /' "$tmp/kustomize.err"
    exit 1
  fi
}

case $mode in
  npm-ci)
    need node "Debian/nodesource nodejs"
    need npm "nodesource nodejs (npm)"
    cache=$1
    # Every locked package must run on Debian 12's node (18): a newer node on this machine would
    # hide an `npm ci` that warns EBADENGINE and a package that fails on a fresh Debian.
    node -e '
      const lock = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
      const debianNode = 18;
      const bad = [];
      for (const [name, p] of Object.entries(lock.packages || {})) {
        const want = p.engines && p.engines.node;
        if (!want) continue;
        const m = /^\s*>=?\s*v?(\d+)/.exec(want) || /^\s*[\^~]?\s*v?(\d+)/.exec(want);
        if (!m || Number(m[1]) > debianNode) bad.push(`${name || "(root)"} wants node ${want}`);
      }
      if (bad.length) {
        console.log(`FAIL: package-lock.json has packages that the node of Debian 12 (${debianNode}) cannot run (pin older versions):\n  ` + bad.join("\n  "));
        process.exit(1);
      }' "$here/package-lock.json" || exit 1
    stamp=$here/node_modules/.package-lock.json
    if [ -f "$stamp" ] && [ "$stamp" -nt "$here/package-lock.json" ] &&
      [ -d "$here/node_modules/kubernetes-models" ] && [ -d "$here/node_modules/yaml" ]; then
      echo "node_modules is up to date"
      exit 0
    fi
    mkdir -p "$cache"
    (cd "$here" && npm ci --no-audit --no-fund --cache "$cache") || { echo "FAIL: npm ci in $here"; exit 1; }
    ;;
  render)
    need "$kubectl" "the pinned kubectl; its kustomize renders the manifests"
    need_node_modules
    tmpdir
    render "$cronjob/$1" "$tmp/rendered.yaml"
    shift
    files=("$tmp/rendered.yaml")
    n=0
    for with in "$@"; do
      n=$((n + 1))
      render "$cronjob/$with" "$tmp/with$n.yaml"
      files+=("$tmp/with$n.yaml")
    done
    node "$here/check.mjs" "${files[@]}"
    ;;
  broken)
    need "$kubectl" "the pinned kubectl; its kustomize renders the manifests"
    need_node_modules
    file=$1
    target=$(sed -n 's/^# target: //p' "$file")
    check=$(sed -n 's/^# check: //p' "$file")
    with=$(sed -n 's/^# with: //p' "$file")
    patch_target=$(sed -n 's/^# patch-target: //p' "$file")
    if [ -z "$target" ] || [ -z "$check" ]; then echo "FAIL: $file lacks '# target:' or '# check:'"; exit 1; fi
    tmpdir
    # Kustomize loads patch files only from under the kustomization's folder: copy the patch.
    cp "$file" "$tmp/broken.yaml"
    rel=$(realpath --relative-to="$tmp" "$cronjob/$target")
    { printf 'resources:\n  - %s\npatches:\n  - path: broken.yaml\n' "$rel"
      if [ -n "$patch_target" ]; then
        printf '    target:\n      kind: %s\n      name: %s\n' "${patch_target%%/*}" "${patch_target#*/}"
      fi
    } >"$tmp/kustomization.yaml"
    render "$tmp" "$tmp/rendered.yaml"
    # What the target is checked with (an example's overlay), unbroken.
    extra=()
    if [ -n "$with" ]; then
      render "$cronjob/$with" "$tmp/with.yaml"
      extra=("$tmp/with.yaml")
    fi
    # The unbroken target passes (so the failure below is this patch's doing).
    render "$cronjob/$target" "$tmp/good.yaml"
    node "$here/check.mjs" "$tmp/good.yaml" "${extra[@]}" >"$tmp/good.out" || { echo "FAIL: $target itself fails:"; cat "$tmp/good.out"; exit 1; }
    node "$here/check.mjs" --expect "$check" "$tmp/rendered.yaml" "${extra[@]}"
    ;;
  history)
    # The persistence default and its alternatives, each rendered and checked (check.mjs's
    # "history" rule), plus what the rule must refuse.
    need "$kubectl" "the pinned kubectl; its kustomize renders the manifests"
    need_node_modules
    tmpdir
    rel=$(realpath --relative-to="$tmp" "$cronjob/k8s")
    failed=0
    # variant NAME EXPECT RESOURCE [COMPONENT] [PATCH...]: render, then check (EXPECT: ok, or the
    # check that must fail).
    variant() {
      name=$1 expect=$2 resource=$3 component=${4-}
      shift 3; [ $# -gt 0 ] && shift
      mkdir -p "$tmp/$name"
      { printf 'resources:\n  - ../%s/%s\n' "$rel" "$resource"
        [ -n "$component" ] && printf 'components:\n  - ../%s/components/%s\n' "$rel" "$component"
        if [ $# -gt 0 ]; then printf 'patches:\n'; for p in "$@"; do printf '  - patch: |-\n'; sed 's/^/      /' <<<"$p"; done; fi
      } >"$tmp/$name/kustomization.yaml"
      render "$tmp/$name" "$tmp/$name.yaml"
      if [ "$expect" = ok ]; then node "$here/check.mjs" "$tmp/$name.yaml" >"$tmp/$name.out"
      else node "$here/check.mjs" --expect "$expect" "$tmp/$name.yaml" >"$tmp/$name.out"; fi
      rc=$?
      echo "$name: $(tail -1 "$tmp/$name.out")"
      [ "$rc" -eq 0 ] || { sed 's/^/    /' "$tmp/$name.out"; failed=1; }
    }
    one_pod='apiVersion: batch/v1
kind: CronJob
metadata: {name: ncclsmoke}
spec:
  jobTemplate:
    spec:
      completions: 1
      parallelism: 1
      template:
        spec:
          containers:
            - name: ncclsmoke
              env:
                - {name: NCCLSMOKE_PODS, value: "1"}'
    rwx='apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ncclsmoke-history, namespace: ncclsmoke}
spec:
  accessModes: ["ReadWriteMany"]'
    variant default-cpu ok overlays/cpu
    variant default-gpu-efa ok overlays/gpu-efa
    variant external ok overlays/cpu history-postgres-external
    variant sqlite-one-pod ok overlays/cpu history-pvc "$one_pod"
    variant sqlite-four-pods history overlays/cpu history-pvc
    variant sqlite-rwx history overlays/cpu history-pvc "$one_pod" "$rwx"
    # What the default is, said outright: the smoke pods read the history's URL from the Secret,
    # it names the Service of a one-replica StatefulSet whose data is a ReadWriteOnce claim, and
    # no emptyDir of the CronJob holds it; the external component drops the bundled server and
    # Secret but keeps the reference; the SQLite component is a ReadWriteOnce claim alone.
    node -e '
      const { parseAllDocuments } = require(process.argv[1]);
      const load = (f) => parseAllDocuments(require("fs").readFileSync(f, "utf8")).map((d) => d.toJSON());
      const errs = [];
      const podOf = (docs) => docs.find((o) => o.kind === "CronJob").spec.jobTemplate.spec.template.spec;
      const env = (docs, n) => podOf(docs).containers[0].env.find((e) => e.name === n);
      for (const f of [process.argv[2], process.argv[3]]) {
        const docs = load(f);
        const h = env(docs, "NCCLSMOKE_HISTORY");
        const ref = h?.valueFrom?.secretKeyRef;
        const secret = docs.find((o) => o.kind === "Secret" && o.metadata.name === ref?.name);
        const url = secret && Buffer.from(secret.data[ref.key], "base64").toString();
        const sts = docs.find((o) => o.kind === "StatefulSet");
        const svc = docs.find((o) => o.kind === "Service" && url && url.startsWith("postgresql://" + o.metadata.name + ":"));
        if (!url) errs.push(`${f}: NCCLSMOKE_HISTORY is not from a Secret of the render: ${JSON.stringify(h)}`);
        if (!svc) errs.push(`${f}: the history URL ${url} names no Service of the render`);
        const vct = sts?.spec.volumeClaimTemplates ?? [];
        if (!sts || sts.spec.replicas !== 1 || !vct.length || !vct.every((t) => t.spec.accessModes.join() === "ReadWriteOnce"))
          errs.push(`${f}: no one-replica StatefulSet on a ReadWriteOnce claim`);
        if (podOf(docs).volumes.some((v) => v.name === "history"))
          errs.push(`${f}: the CronJob still has a history volume`);
        const pw = env(docs, "PGPASSWORD")?.valueFrom?.secretKeyRef;
        if (!pw) errs.push(`${f}: PGPASSWORD not from the Secret`);
        // The password is a Secret the operator makes: never in the render, and the server reads the
        // same one as the clients.
        if (pw && docs.some((o) => o.kind === "Secret" && o.metadata.name === pw.name))
          errs.push(`${f}: the password Secret ${pw.name} is in the render (the repository would ship it)`);
        const spw = sts?.spec.template.spec.containers[0].env.find((e) => e.name === "POSTGRES_PASSWORD")?.valueFrom?.secretKeyRef;
        if (!spw || spw.name !== pw?.name || spw.key !== pw?.key)
          errs.push(`${f}: the server POSTGRES_PASSWORD (${JSON.stringify(spw)}) is not the PGPASSWORD of the clients (${JSON.stringify(pw)})`);
      }
      const ext = load(process.argv[4]);
      if (ext.some((o) => o.kind === "StatefulSet" || o.kind === "Secret")) errs.push("external: the bundled server or Secret is still rendered");
      if (env(ext, "NCCLSMOKE_HISTORY")?.valueFrom?.secretKeyRef?.name !== "ncclsmoke-history") errs.push("external: NCCLSMOKE_HISTORY lost its Secret");
      if (env(ext, "PGPASSWORD")?.valueFrom?.secretKeyRef?.name !== "ncclsmoke-history") errs.push("external: PGPASSWORD is not the key of your Secret ncclsmoke-history");
      if (ext.some((o) => o.kind === "PodDisruptionBudget")) errs.push("external: the PodDisruptionBudget of the bundled server is still rendered");
      const one = load(process.argv[5]);
      const pvc = one.find((o) => o.kind === "PersistentVolumeClaim");
      const vol = podOf(one).volumes.find((v) => v.name === "history");
      if (!pvc || pvc.spec.accessModes.join() !== "ReadWriteOnce") errs.push("sqlite: the claim is not ReadWriteOnce");
      if (!vol || vol.emptyDir || vol.persistentVolumeClaim?.claimName !== pvc?.metadata.name) errs.push("sqlite: history volume is " + JSON.stringify(vol) + ", not the claim alone");
      if (one.some((o) => o.kind === "StatefulSet" || o.kind === "Secret" || o.kind === "PodDisruptionBudget" ||
        o.metadata.name === "ncclsmoke-history-egress") || env(one, "PGPASSWORD")) errs.push("sqlite: the PostgreSQL parts are still rendered");
      console.log(errs.length ? "FAIL: " + errs.join("; ") : "ok: the default history is the PostgreSQL StatefulSet on a ReadWriteOnce claim; the alternatives render as documented");
      process.exit(errs.length ? 1 : 0);
    ' "$here/node_modules/yaml/dist/index.js" "$tmp/default-cpu.yaml" "$tmp/default-gpu-efa.yaml" "$tmp/external.yaml" "$tmp/sqlite-one-pod.yaml" || failed=1
    exit "$failed"
    ;;
  yamllint)
    need yamllint "Debian yamllint"
    yamllint -s -c "$cronjob/.yamllint" -f parsable "$cronjob/k8s" "$cronjob/gate" "$cronjob/policy" "$here/broken" &&
      echo "ok: yamllint"
    ;;
  profiles-copy)
    if cmp -s "$cronjob/k8s/base/profiles.yaml" "$src/results/judging/profiles.example.yaml"; then
      echo "ok: cronjob/k8s/base/profiles.yaml equals results/judging/profiles.example.yaml"
    else
      echo "FAIL: cronjob/k8s/base/profiles.yaml differs from results/judging/profiles.example.yaml;" \
        "copy it: cp results/judging/profiles.example.yaml cronjob/k8s/base/profiles.yaml"
      diff -u "$src/results/judging/profiles.example.yaml" "$cronjob/k8s/base/profiles.yaml" | head -40
      exit 1
    fi
    ;;
  shellcheck)
    need shellcheck "Debian shellcheck"
    shellcheck -s sh "$cronjob/entrypoint.sh" && echo "ok: shellcheck"
    ;;
  gate-command)
    need "$kubectl" "the pinned kubectl; its kustomize renders the manifests"
    need_node_modules
    bin=$1
    tmpdir
    render "$cronjob/gate" "$tmp/rendered.yaml"
    mkdir -p "$tmp/out"  # the emptyDir mounted there in the pod
    # The init container's command, one word per line, with the ConfigMap path pointed at the
    # source file and the out dir at a temp dir.
    node -e '
      const { parseAllDocuments } = require(process.argv[1]);
      const docs = parseAllDocuments(require("fs").readFileSync(process.argv[2], "utf8")).map((d) => d.toJSON());
      const job = docs.find((o) => o.kind === "Job");
      const c = job.spec.template.spec.initContainers.find((x) => x.name === "ncclsmoke-gate");
      for (const w of [...c.command, ...(c.args ?? [])]) console.log(w);
      for (const e of c.env) if (e.value !== undefined) console.error(e.name + "=" + e.value);
    ' "$here/node_modules/yaml/dist/index.js" "$tmp/rendered.yaml" >"$tmp/cmd" 2>"$tmp/env" || exit 1
    mapfile -t cmd <"$tmp/cmd"
    [ "${cmd[0]}" = ncclsmoke ] || { echo "FAIL: the gate runs ${cmd[0]}, not ncclsmoke"; exit 1; }
    # One rank on loopback: the gate's own environment, with the world shrunk to this machine and
    # the store on a free port.
    port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    for ((i = 0; i < ${#cmd[@]}; i++)); do
      [ "${cmd[$i]}" = --master-port ] && cmd[i + 1]=$port
      case ${cmd[$i]} in
        /etc/ncclsmoke/profiles.yaml) cmd[i]=$cronjob/gate/gate-profiles.yaml ;;
        /var/run/ncclsmoke) cmd[i]=$tmp/out ;;
      esac
    done
    # Pinned either by `--gate` (which implies --nccl-policy pin) or explicitly.
    if ! grep -qx -- "--gate" "$tmp/cmd" && ! grep -A1 -x -- "--nccl-policy" "$tmp/cmd" | grep -qx pin; then
      echo "FAIL: the gate does not pin NCCL (neither --gate nor --nccl-policy pin)"; exit 1
    fi
    env -i PATH=/usr/bin:/bin JOB_COMPLETION_INDEX=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 NODE_NAME=node-0 \
      timeout -k 5 150 "$bin" "${cmd[@]:1}" >"$tmp/gate.log" 2>&1
    rc=$?
    sed 's/^/    /' "$tmp/gate.log" | head -40
    v=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' "$tmp/out/verdict.json" 2>/dev/null)
    if [ "$rc" = 4 ] && [ "$v" = inconclusive ]; then
      echo "ok: the gate command ran; without a GPU it fails closed (exit 4, inconclusive)"
    elif nvidia-smi -L >/dev/null 2>&1; then
      echo "note: a GPU is present: the gate exited $rc with verdict '$v' (not judged here)"
    else
      echo "FAIL: the gate exited $rc with verdict '$v', expected 4/inconclusive on a machine without a GPU"
      exit 1
    fi
    ;;
  image)
    # The manifests run /usr/local/bin/ncclsmoke-entrypoint and `ncclsmoke` from PATH; both
    # Dockerfiles must put them there, as the non-root user the pods run as.
    rc=0
    entry_cmd=$(grep -h 'command: \["/usr/local/bin/' "$cronjob/k8s/base/cronjob.yaml" | sed 's/.*\["\([^"]*\)".*/\1/')
    [ "$entry_cmd" = /usr/local/bin/ncclsmoke-entrypoint ] || { echo "FAIL: base cronjob command is '$entry_cmd'"; rc=1; }
    for f in "$cronjob"/Dockerfile "$cronjob"/Dockerfile.cpu; do
      grep -q "cronjob/entrypoint.sh $entry_cmd" "$f" || { echo "FAIL: $f does not COPY cronjob/entrypoint.sh to $entry_cmd"; rc=1; }
      grep -q 'cpack -G DEB' "$f" || { echo "FAIL: $f does not build the Debian package"; rc=1; }
      grep -v -e '^COPY' -e 'rm -rf' "$f" | grep -q '/tmp/ncclsmoke_\*_amd64.deb' ||
        { echo "FAIL: $f does not install the package (ncclsmoke on PATH as /usr/bin/ncclsmoke)"; rc=1; }
      grep -q '^USER 65532' "$f" || { echo "FAIL: $f does not run as USER 65532 (runAsUser in the manifests)"; rc=1; }
    done
    # The CPU image's runtime stage installs install-deps.sh's runtime profile.
    grep -q 'install-deps.sh runtime' "$cronjob/Dockerfile.cpu" ||
      { echo "FAIL: Dockerfile.cpu does not install the runtime profile"; rc=1; }
    [ "$rc" = 0 ] && echo "ok: Dockerfiles install what the manifests run"
    exit $rc
    ;;
  *)
    echo "usage: deploy_test.sh SOURCE_DIR npm-ci|render|broken|component|yamllint|profiles-copy|shellcheck|image ..."
    exit 2
    ;;
esac
