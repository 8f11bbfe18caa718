// start-up: the newest chapter's fixed entry with `--help` through npm, through tsx and built, in one run side by
// side with `node -e 0` and `tsx -e 0`, in CPU time (what a loaded machine does not inflate) and wall time.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { nowNs, ratioOfMedians, summarize } from "./stats.js";
import { ratioText, type Row } from "./table.js";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";
const TSX = join(REPO, "node_modules", ".bin", process.platform === "win32" ? "tsx.cmd" : "tsx");
/** The bar issue 36 sets: what our own modules add to `--help`, past tsx's own start. */
const OWN_SHARE_GOAL_NS = 0.3e9;

/** The newest chapter snapshot (`ch08` today): the one a reader runs last. */
export function newestChapter(repo = REPO): string {
  const chapters = readdirSync(join(repo, "code", "chapters")).filter((name) => /^ch\d\d$/.test(name));
  return chapters.sort().at(-1) ?? "ch01";
}

/** The newest modification time under `folder`, recursively. */
function newestMtime(folder: string): number {
  let newest = 0;
  for (const entry of readdirSync(folder, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}

interface Sample {
  readonly wall: number;
  /** CPU time of the command and every process it started (user + system), from bash's `times`. */
  readonly cpu: number | undefined;
}

export async function benchStartup(options: { readonly runs: number }): Promise<{ rows: Row[]; notes: string[] }> {
  const notes: string[] = [];
  const chapter = newestChapter();
  const folder = `code/chapters/${chapter}`;
  const srcEntry = `${folder}/src/chapters/${chapter}.ts`;
  const distEntry = `${folder}/dist/chapters/${chapter}.js`;
  const distPath = join(REPO, distEntry);
  const stale = existsSync(distPath) && statSync(distPath).mtimeMs < newestMtime(join(REPO, folder, "src"));
  if (!existsSync(distPath) || stale) {
    // dist/ is git-ignored build output: build it when it is missing or older than src/, so the row is today's code.
    const why = stale ? "older than its src/" : "missing";
    notes.push(`start-up: ${distEntry} was ${why}; built it with \`npm run build -w @agent-tutorial/${chapter}\`.`);
    const build = spawnSync(NPM, ["run", "build", "-w", `@agent-tutorial/${chapter}`, "--silent"], {
      cwd: REPO,
      stdio: "inherit",
    });
    if (build.status !== 0) notes.push("start-up: the build failed; run `npm run build` and look at its errors.");
  }
  const scripts = (JSON.parse(readFileSync(`${REPO}package.json`, "utf8")) as { scripts?: Record<string, string> })
    .scripts;
  const commands: Record<string, readonly string[] | undefined> = {
    node: [process.execPath, "-e", "0"],
    tsx0: [TSX, "-e", "0"],
    npm: scripts?.[chapter] === undefined ? undefined : [NPM, "run", chapter, "--", "--help"],
    tsx: [TSX, srcEntry, "--help"],
    dist: existsSync(distPath) ? [process.execPath, distEntry, "--help"] : undefined,
  };
  if (commands.npm === undefined) {
    notes.push(
      `start-up: the root package.json has no \`${chapter}\` script, so \`npm run ${chapter} -- --help\` was skipped.`,
    );
  }
  const bash = spawnSync("bash", ["-c", "times"], { encoding: "utf8" }).status === 0;
  if (!bash) notes.push("start-up: no bash for `times`, so only wall time was measured.");
  const load = loadavg();
  // Round after round, every variant once per round, so each sees the same machine; one warm-up round.
  const samples: Record<string, Sample[]> = {};
  for (let round = 0; round < 1 + options.runs; round += 1) {
    for (const [name, command] of Object.entries(commands)) {
      if (command === undefined) continue;
      const sample = await timeCommand(command, bash);
      if (round > 0) (samples[name] ??= []).push(sample);
    }
  }
  const loadAfter = loadavg();
  const walls = (key: string) => samples[key]?.map((sample) => sample.wall);
  const cpus = (key: string) => {
    const values = samples[key]?.map((sample) => sample.cpu);
    return values === undefined || values.some((value) => value === undefined) ? undefined : (values as number[]);
  };
  const row = (values: number[] | undefined, name: string, base?: number[], baseName?: string): Row =>
    values === undefined
      ? { name, kind: "time", note: "skipped (see notes)" }
      : {
          name,
          kind: "time",
          value: summarize(values),
          ...(base === undefined || baseName === undefined
            ? {}
            : { ratio: ratioText(ratioOfMedians(values, base), baseName) }),
        };
  /** Per-round differences `a − b`: what one command adds to the other, round by round. */
  const minus = (a: number[] | undefined, b: number[] | undefined) =>
    a === undefined || b === undefined ? undefined : a.map((value, index) => value - (b[index] ?? 0));
  const help = `${chapter} --help`;
  const rows: Row[] = [];
  for (const [measure, values] of [
    ["CPU", cpus],
    ["wall", walls],
  ] as const) {
    const node = values("node");
    const tsx0 = values("tsx0");
    rows.push(
      row(node, `start-up ${measure}: node -e 0`),
      row(tsx0, `start-up ${measure}: tsx -e 0`, node, "node -e 0"),
      row(values("npm"), `start-up ${measure}: npm run ${chapter} -- --help`, node, "node -e 0"),
      row(values("tsx"), `start-up ${measure}: tsx src/chapters/${chapter}.ts --help`, tsx0, "tsx -e 0"),
      row(values("dist"), `start-up ${measure}: node dist/chapters/${chapter}.js --help`, node, "node -e 0"),
    );
    if (measure !== "CPU") continue;
    const own = minus(values("tsx"), tsx0);
    const ownRow = row(own, `start-up CPU: our own share of ${help} (tsx --help − tsx -e 0)`);
    rows.push(
      own === undefined
        ? ownRow
        : {
            ...ownRow,
            goal: { text: "≤ 0.3 s", met: summarize(own).median <= OWN_SHARE_GOAL_NS },
          },
      row(minus(values("npm"), values("tsx")), `start-up CPU: npm's share of npm run ${chapter} (npm − tsx --help)`),
    );
  }
  const fixed = (values: readonly number[]) => values.map((value) => value.toFixed(2)).join(" ");
  notes.push(
    `start-up: ${chapter}, the newest chapter; load average (1, 5, 15 min) ${fixed(load)} before the section, ` +
      `${fixed(loadAfter)} after it, on ${spawnSync("nproc", { encoding: "utf8" }).stdout.trim() || "?"} cores. ` +
      "CPU is user + system of the command and every process it started (bash's times), so a loaded machine " +
      "stretches the wall rows far more than the CPU rows.",
  );
  return { rows, notes };
}

/** Wall and CPU time of one run; a failing run is an error, not a fast sample. */
function timeCommand(command: readonly string[], bash: boolean): Promise<Sample> {
  // bash runs the command, then prints its children's user and system times (`times`' second line) on fd 3.
  const [executable, ...args] = bash
    ? ["bash", "-c", '"$@" >/dev/null 2>&1 </dev/null 3>&-; status=$?; times >&3; exit $status', "bash", ...command]
    : (command as [string, ...string[]]);
  return new Promise((resolve, reject) => {
    const start = nowNs();
    const child = spawn(executable, args, { cwd: REPO, stdio: ["ignore", "ignore", "ignore", "pipe"] });
    let times = "";
    child.stdio[3]?.on("data", (chunk: Buffer) => (times += chunk.toString()));
    child.once("error", reject);
    child.once("close", (code) => {
      const wall = nowNs() - start;
      if (code !== 0) {
        reject(new Error(`${command.join(" ")} exited with ${code}`));
        return;
      }
      resolve({ wall, cpu: bash ? childrenCpu(times) : undefined });
    });
  });
}

/** The children's line of bash's `times` (`0m0.512s 0m0.104s`) as nanoseconds of user + system. */
export function childrenCpu(times: string): number | undefined {
  const line = times.trim().split("\n")[1];
  const parts = line === undefined ? [] : [...line.matchAll(/(\d+)m([\d.]+)s/g)];
  if (parts.length !== 2) return undefined;
  return parts.reduce((sum, part) => sum + (Number(part[1]) * 60 + Number(part[2])) * 1e9, 0);
}
