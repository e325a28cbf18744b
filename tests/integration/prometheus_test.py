#!/usr/bin/env python3
"""kolo's metrics as Prometheus and Grafana see them.

Three checks, one per subcommand (tests/integration/monitoring.cmake runs
each as a ctest test):

  schema       deploy/grafana/kolo.json is a dashboard Grafana can import:
               the keys it needs, unique panel ids, panels on the 24-column
               grid without overlaps, every target a PromQL expr with a
               refId, every variable a query uses defined.
  dashboard    deploy/prometheus/prometheus.yml passes promtool; a real
               Prometheus (Debian's /usr/bin/prometheus, an instance of our
               own on a free loopback port, never the package's service)
               scrapes a running two-rank kolo-train job under `kolorun
               --metrics-port 0` every second, with that file's
               honor_labels. Once it has scraped ten times and the job has
               finished its first epoch (the test accuracy exists from
               then), the kolo series must be there under kolo's own job
               label, each template variable must list the job's values,
               and every query of the dashboard, its variables substituted,
               must be valid and return data (an all-NaN answer counts as
               none: Grafana draws nothing for it).
  scrape-time  a scrape of a four-rank job's /metrics, timed while all four
               ranks train: the median of seven must be under 0.5 s.

Whatever happens, the job gets SIGTERM (which kolorun forwards to its
ranks), Prometheus is stopped, and the scratch directory is removed; both
children also get SIGTERM from the kernel should this script die first
(PR_SET_PDEATHSIG). A missing prerequisite (prometheus, Fashion-MNIST)
skips with exit code 77, or fails under CI=true, where scripts/setup.sh
installed everything. Every wait is bounded; the whole run stays under
150 s (a passing one takes about 15).
"""
import argparse
import ctypes
import json
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests
BUDGET_SECONDS = 150
START = time.monotonic()

# What the dashboard's variables stand for when the test evaluates its
# queries: the job it trains, every rank and host, and windows that the
# test's 1 s scrapes fill (rate() divides by the whole window, so one
# longer than the data would understate every rate).
SCRAPES = 10
SUBSTITUTIONS = {
    "$__rate_interval": f"{SCRAPES}s",
    "$__interval": "5s",
    "$__range": "1m",
    "$job": "kolo-train",
    "$rank": ".*",
    "$host": ".*",
}
PANEL_TYPES = {"row", "timeseries", "stat"}


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def log(message):
    print(f"[{time.monotonic() - START:6.1f}s] {message}", flush=True)


def require(present, what):
    if present:
        return
    if os.environ.get("CI") == "true":
        raise Failure(f"missing under CI (CI=true), where it must be "
                      f"installed: {what}")
    raise Skip(f"missing: {what}")


def remaining(limit):
    """`limit` seconds, or less when the run's budget ends sooner."""
    return max(0.0, min(limit, BUDGET_SECONDS - (time.monotonic() - START)))


def wait_for(what, limit, probe, interval=0.25):
    """Calls probe() until it returns something true, for at most `limit`
    seconds; returns that, or raises Failure naming `what`."""
    end = time.monotonic() + remaining(limit)
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= end:
            raise Failure(f"timed out after {limit} s waiting for {what}")
        time.sleep(interval)


def http_get(url, timeout=5):
    """The body of `url`, or None when there is no answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.read().decode()
    except (OSError, urllib.error.URLError):
        return None


def free_port():
    """A loopback port nobody listened on a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent():
    # PR_SET_PDEATHSIG: SIGTERM when this script's process dies.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def descendants(pid):
    """The live processes under `pid`, from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def tail(path, lines=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(none)"


class Child:
    """A program started with its output in files under `scratch`;
    stop() sends SIGTERM, then SIGKILL after `grace` seconds."""

    def __init__(self, name, argv, scratch, env=None):
        self.name = name
        self.out_path = os.path.join(scratch, name + ".out")
        self.err_path = os.path.join(scratch, name + ".err")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                env=env, preexec_fn=die_with_parent)
        log(f"started {name} (pid {self.process.pid}): {' '.join(argv)}")

    def stop(self, grace=30):
        """SIGTERM, then SIGKILL; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                log(f"{self.name} outlived SIGTERM by {grace} s: SIGKILL")
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def output(self):
        return (f"--- {self.name} stdout (last lines):\n{tail(self.out_path)}"
                f"--- {self.name} stderr (last lines):\n{tail(self.err_path)}")


class TrainingJob(Child):
    """`kolorun -np N --metrics-port 0 kolo-train ...`, training far longer
    than the test looks (8,000 images an epoch: under a second each, so the
    first evaluation comes early) until stop()."""

    def __init__(self, args, ranks, scratch):
        env = {k: v for k, v in os.environ.items()
               if k not in ("KOLO_BACKEND", "KOLO_METRICS_PORT",
                            "KOLO_METRICS_ADDRESS")}
        super().__init__(
            f"kolorun-np{ranks}",
            [args.kolorun, "-np", str(ranks), "--metrics-port", "0",
             args.kolo_train, "--threads", "1", "--model", "lenet",
             "--dataset", "fashion-mnist", "--data-dir", args.data_dir,
             "--epochs", "1000", "--batch-size", "32", "--train-subset",
             "8000", "--test-subset", "500"], scratch, env)
        self.ranks = ranks
        self.port = None
        self.rank_pids = []

    def wait_for_port(self):
        pattern = re.compile(r"metrics at http://127\.0\.0\.1:(\d+)/metrics")

        def printed():
            if self.process.poll() is not None:
                raise Failure(f"kolorun exited with {self.process.returncode}"
                              f" before serving metrics\n{self.output()}")
            with open(self.err_path, errors="replace") as f:
                found = pattern.search(f.read())
            return found and int(found.group(1))

        self.port = wait_for("kolorun's \"metrics at\" line", 30, printed)
        log(f"kolorun serves metrics on port {self.port}")
        return self.port

    def metrics(self):
        return http_get(f"http://127.0.0.1:{self.port}/metrics")

    def wait_until_training(self, limit=60):
        """Until every rank has counted a training step."""
        def all_ranks_train():
            text = self.metrics() or ""
            steps = re.findall(
                r'^kolo_train_steps_total\{[^}]*rank="(\d+)"[^}]*\} ([0-9.e+]+)',
                text, re.M)
            return len({r for r, v in steps if float(v) > 0}) == self.ranks

        wait_for(f"all {self.ranks} ranks to train", limit, all_ranks_train,
                 interval=0.5)
        self.rank_pids = descendants(self.process.pid)

    def check_stopped(self):
        """After stop(): that no rank outlived kolorun (they may take a
        moment to exit after it)."""
        end = time.monotonic() + 10
        while any(running(p) for p in self.rank_pids):
            if time.monotonic() > end:
                alive = [p for p in self.rank_pids if running(p)]
                raise Failure(f"ranks outlived kolorun: pids {alive}\n"
                              f"{self.output()}")
            time.sleep(0.2)
        if self.process.returncode != 128 + signal.SIGTERM:
            raise Failure(f"kolorun exited with {self.process.returncode} on "
                          f"SIGTERM, want {128 + signal.SIGTERM}\n"
                          f"{self.output()}")
        if self.metrics() is not None:
            raise Failure(f"port {self.port} still serves metrics after the "
                          f"job stopped")
        log(f"job stopped (kolorun exit {self.process.returncode}); none of "
            f"its {len(self.rank_pids)} processes left")


class Prometheus(Child):
    """Our own Prometheus on a free loopback port with a scratch TSDB,
    scraping `target` every second with honor_labels, as
    deploy/prometheus/prometheus.yml does."""

    def __init__(self, binary, target, scratch):
        config = os.path.join(scratch, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: kolo
    honor_labels: true
    static_configs:
      - targets: ["{target}"]
""")
        self.port = free_port()
        super().__init__(
            "prometheus",
            [binary, f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(scratch, 'tsdb')}",
             f"--web.listen-address=127.0.0.1:{self.port}",
             "--log.level=warn"], scratch)
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self):
        def ready():
            if self.process.poll() is not None:
                raise Failure(f"prometheus exited with "
                              f"{self.process.returncode}\n{self.output()}")
            return http_get(self.url + "/-/ready", timeout=1) is not None

        wait_for("prometheus to be ready", 30, ready)
        log(f"prometheus ready at {self.url}")

    def api(self, path, **params):
        """The `data` of an API answer; Failure with Prometheus' error."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                answer = json.load(reply)
        except urllib.error.HTTPError as e:
            answer = json.load(e)
        if answer.get("status") != "success":
            raise Failure(f"{answer.get('errorType')}: {answer.get('error')}")
        return answer["data"]

    def query(self, expr):
        return self.api("query", query=expr)["result"]


def substitute(expr):
    for variable in sorted(SUBSTITUTIONS, key=len, reverse=True):
        value = SUBSTITUTIONS[variable]
        expr = expr.replace("${" + variable[1:] + "}", value)
        expr = expr.replace(variable, value)
    return expr


def has_data(result):
    """Whether an instant query's result holds at least one number."""
    for sample in result:
        value = float(sample["value"][1])
        if not math.isnan(value):
            return True
    return False


# --- schema ---------------------------------------------------------------

def check_schema(dashboard):
    """Every problem found, as lines."""
    problems = []
    for key, kind in (("title", str), ("uid", str), ("schemaVersion", int),
                      ("panels", list), ("templating", dict)):
        if not isinstance(dashboard.get(key), kind):
            problems.append(f"dashboard: {key} missing or not a "
                            f"{kind.__name__}")
    if problems:
        return problems
    if dashboard["schemaVersion"] < 36:
        problems.append(f"schemaVersion {dashboard['schemaVersion']} < 36: "
                        f"older than the datasource-object panels")
    variables = {}
    for variable in dashboard["templating"].get("list", []):
        variables[variable.get("name")] = variable
    if variables.get("datasource", {}).get("type") != "datasource" or \
            variables["datasource"].get("query") != "prometheus":
        problems.append("templating: no variable datasource of type "
                        "datasource for prometheus")
    for name in ("job", "rank", "host"):
        variable = variables.get(name, {})
        query = variable.get("query", {})
        query = query.get("query") if isinstance(query, dict) else query
        if variable.get("type") != "query" or \
                not str(query).startswith("label_values("):
            problems.append(f"templating: no label_values query variable "
                            f"{name}")
    known = {"$" + n for n in variables} | {
        "$__rate_interval", "$__interval", "$__range"}
    ids = set()
    cells = {}
    for index, panel in enumerate(dashboard["panels"]):
        where = f"panel #{index} ({panel.get('title')!r})"
        for key in ("id", "type", "title", "gridPos"):
            if key not in panel:
                problems.append(f"{where}: no {key}")
        if panel.get("id") in ids:
            problems.append(f"{where}: id {panel.get('id')} used twice")
        ids.add(panel.get("id"))
        if panel.get("type") not in PANEL_TYPES:
            problems.append(f"{where}: type {panel.get('type')!r} is not one "
                            f"of {sorted(PANEL_TYPES)}")
        grid = panel.get("gridPos", {})
        if not all(isinstance(grid.get(k), int) for k in "hwxy") or \
                grid["x"] < 0 or grid["w"] < 1 or grid["x"] + grid["w"] > 24:
            problems.append(f"{where}: gridPos {grid} is not on the 24-column"
                            f" grid")
        else:
            for y in range(grid["y"], grid["y"] + grid["h"]):
                for x in range(grid["x"], grid["x"] + grid["w"]):
                    if (x, y) in cells:
                        problems.append(f"{where}: overlaps {cells[(x, y)]} "
                                        f"at x={x} y={y}")
                        break
                    cells[(x, y)] = where
                else:
                    continue
                break
        if panel.get("type") == "row":
            continue
        targets = panel.get("targets")
        if not isinstance(targets, list) or not targets:
            problems.append(f"{where}: no targets")
            continue
        ref_ids = set()
        for target in targets:
            if not target.get("expr") or not target.get("refId"):
                problems.append(f"{where}: a target without expr or refId: "
                                f"{target}")
                continue
            if target["refId"] in ref_ids:
                problems.append(f"{where}: refId {target['refId']} twice")
            ref_ids.add(target["refId"])
            for variable in re.findall(r"\$\{?(\w+)", target["expr"]):
                if "$" + variable not in known:
                    problems.append(f"{where}: ${variable} is no variable of "
                                    f"the dashboard: {target['expr']}")
    return problems


def load_dashboard(path):
    with open(path) as f:
        dashboard = json.load(f)
    problems = check_schema(dashboard)
    if problems:
        raise Failure(f"{path}:\n  " + "\n  ".join(problems))
    return dashboard


def run_schema(args):
    dashboard = load_dashboard(args.dashboard)
    targets = sum(len(p.get("targets", [])) for p in dashboard["panels"])
    log(f"{args.dashboard}: {len(dashboard['panels'])} panels, {targets} "
        f"queries, schema ok")


# --- dashboard --------------------------------------------------------------

def check_series(prometheus):
    """The kolo series under kolo's job label, for both ranks."""
    result = prometheus.query('kolo_train_steps_total{job="kolo-train"}')
    ranks = sorted(s["metric"].get("rank") for s in result)
    if ranks != ["0", "1"]:
        raise Failure(f"kolo_train_steps_total{{job=\"kolo-train\"}}: ranks "
                      f"{ranks}, want ['0', '1']: {result}")
    for sample in result:
        if float(sample["value"][1]) <= 0:
            raise Failure(f"no training steps counted: {sample}")
    names = prometheus.api("label/__name__/values",
                           **{"match[]": '{job="kolo-train"}'})
    kolo = sorted(n for n in names if n.startswith("kolo_"))
    log(f"{len(kolo)} kolo metric names under job=\"kolo-train\"")
    for name in ("kolo_info", "kolo_operations_total",
                 "kolo_engine_call_seconds_bucket",
                 "kolo_process_cpu_seconds_total",
                 "kolo_host_network_receive_bytes_total"):
        if name not in kolo:
            raise Failure(f"{name} not scraped; kolo series: {kolo}")
    up = prometheus.query('up{job="kolo"}')
    if len(up) != 1 or up[0]["value"][1] != "1":
        raise Failure(f"up{{job=\"kolo\"}}: {up}")


def check_variables(prometheus, dashboard):
    """Each label_values(metric, label) variable, as Grafana asks it."""
    want = {"job": {"kolo-train"}, "rank": {"0", "1"}}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]
        query = query["query"] if isinstance(query, dict) else query
        found = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
        values = set(prometheus.api(f"label/{found.group(2)}/values",
                                    **{"match[]": substitute(found.group(1))}))
        if not values or not want.get(variable["name"], set()) <= values:
            raise Failure(f"variable {variable['name']}: {query} gives "
                          f"{sorted(values)}")
        log(f"variable {variable['name']}: {sorted(values)}")


def check_panels(prometheus, dashboard):
    failures = []
    checked = 0
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = substitute(target["expr"])
            where = (f"panel {panel['title']!r} (id {panel['id']}) refId "
                     f"{target['refId']}: {expr}")
            try:
                result = prometheus.query(expr)
            except Failure as e:
                failures.append(f"{where}\n    invalid: {e}")
                continue
            checked += 1
            if not has_data(result):
                failures.append(f"{where}\n    no data: {result}")
                continue
            values = sorted(float(s["value"][1]) for s in result)
            log(f"{panel['title']} {target['refId']}: {len(result)} series,"
                f" {values[0]:.4g} .. {values[-1]:.4g}")
    if failures:
        raise Failure(f"{len(failures)} dashboard queries failed:\n  " +
                      "\n  ".join(failures))
    log(f"all {checked} panel queries valid and with data")


def check_example_config(args):
    """deploy/prometheus/prometheus.yml: valid for promtool, and keeping
    kolo's job label."""
    with open(args.prometheus_config) as f:
        if not re.search(r"^\s*honor_labels: true$", f.read(), re.M):
            raise Failure(f"{args.prometheus_config}: no honor_labels: true")
    promtool = os.path.join(os.path.dirname(args.prometheus), "promtool")
    checked = subprocess.run([promtool, "check", "config",
                              args.prometheus_config], capture_output=True,
                             text=True, timeout=30)
    if checked.returncode != 0:
        raise Failure(f"promtool check config {args.prometheus_config}:\n"
                      f"{checked.stdout}{checked.stderr}")
    log(f"{args.prometheus_config}: promtool finds it valid")


def run_dashboard(args, scratch):
    dashboard = load_dashboard(args.dashboard)
    check_example_config(args)
    job = TrainingJob(args, 2, scratch)
    prometheus = None
    try:
        port = job.wait_for_port()
        prometheus = Prometheus(args.prometheus, f"127.0.0.1:{port}", scratch)
        prometheus.wait_ready()

        def target_up():
            targets = prometheus.api("targets")["activeTargets"]
            return targets and targets[0]["health"] == "up"

        wait_for("the scrape target to be up", 30, target_up)

        # SCRAPES scrapes fill every rate() window of the dashboard. The test accuracy comes with the end of the first epoch,
        # the process figures once kolorun knows the ranks' pids.
        def scraped():
            counts = prometheus.query(
                'count_over_time(kolo_info{job="kolo-train"}[1m])')
            accuracy = prometheus.query(
                'kolo_train_test_accuracy_ratio{job="kolo-train"}')
            cpu = prometheus.query(
                'kolo_process_cpu_seconds_total{job="kolo-train"}')
            return (len(counts) == 2 and
                    all(float(c["value"][1]) >= SCRAPES for c in counts) and
                    len(accuracy) == 2 and len(cpu) == 2)

        wait_for(f"{SCRAPES} scrapes of both ranks and their first "
                 f"evaluation", 90, scraped, interval=1)
        log(f"prometheus has scraped both ranks {SCRAPES} times")
        job.rank_pids = descendants(job.process.pid)
        check_series(prometheus)
        check_variables(prometheus, dashboard)
        check_panels(prometheus, dashboard)
    except Failure as e:
        raise Failure(f"{e}\n{job.output()}" +
                      (prometheus.output() if prometheus else ""))
    finally:
        job.stop()
        if prometheus is not None:
            prometheus.stop()
    job.check_stopped()


# --- scrape-time ----------------------------------------------------------

def run_scrape_time(args, scratch, ranks=4, scrapes=7):
    job = TrainingJob(args, ranks, scratch)
    try:
        job.wait_for_port()
        job.wait_until_training()
        seconds = []
        size = 0
        for _ in range(scrapes):
            begin = time.monotonic()
            text = job.metrics()
            seconds.append(time.monotonic() - begin)
            if text is None:
                raise Failure("a scrape of /metrics got no answer")
            size = len(text)
            time.sleep(0.2)
        median = statistics.median(seconds)
        series = sum(1 for line in text.splitlines()
                     if line and not line.startswith("#"))
        log(f"{ranks} ranks: /metrics is {size} bytes, {series} samples; "
            f"scrape seconds {', '.join(f'{s:.4f}' for s in seconds)}; "
            f"median {median:.4f} s, max {max(seconds):.4f} s")
        if median >= 0.5:
            raise Failure(f"the median scrape of {ranks} ranks took "
                          f"{median:.3f} s, want < 0.5 s")
    except Failure as e:
        raise Failure(f"{e}\n{job.output()}")
    finally:
        job.stop()
    job.check_stopped()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("check", choices=["schema", "dashboard", "scrape-time"])
    parser.add_argument("--dashboard", required=True)
    parser.add_argument("--prometheus-config", required=True)
    parser.add_argument("--kolorun")
    parser.add_argument("--kolo-train")
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--prometheus", default="/usr/bin/prometheus")
    args = parser.parse_args()
    # SIGTERM (ctest stopped, say) unwinds like a failure: the children are
    # stopped and the scratch directory removed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    scratch = tempfile.mkdtemp(prefix="kolo_prometheus_test_")
    try:
        if args.check == "schema":
            run_schema(args)
        else:
            require(args.kolorun and args.kolo_train,
                    "--kolorun and --kolo-train")
            require(os.path.exists(os.path.join(
                args.data_dir, "train-images-idx3-ubyte.gz")),
                f"Fashion-MNIST at {args.data_dir} (dataset-fashion-mnist)")
            if args.check == "dashboard":
                require(os.access(args.prometheus, os.X_OK),
                        f"{args.prometheus} (Debian package prometheus; "
                        f"scripts/setup.sh installs it)")
                run_dashboard(args, scratch)
            else:
                run_scrape_time(args, scratch)
    except Skip as e:
        print(f"SKIPPED: {e}", flush=True)
        return SKIP
    except Failure as e:
        print(f"FAILED: {e}", flush=True)
        return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
