// shell: the runner's own overhead on a one-liner, and a ~1 GiB flood (wall time, peak RSS in a child process).
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { findPowerShell, PowerShellRunner } from "../../code/chapters/ch03/src/adapters/powershell.js";
import { floodCommand, RUNNER_PRELUDE } from "./shell-commands.js";
import { nowNs, pairedRatio, rounds, summarize } from "./stats.js";
import { formatValue, ratioText, type Row } from "./table.js";
import { makeTemp, removeTemp } from "./temp.js";

const FLAGS = ["-NoLogo", "-NoProfile", "-NonInteractive"];
const CHILD = fileURLToPath(new URL("./shell-flood-child.ts", import.meta.url));
const REPO = fileURLToPath(new URL("../../", import.meta.url));
/** Peak RSS may exceed the one-liner's by this much and still count as "bounded" (the cap itself is 50 KB). */
const RSS_SLACK_BYTES = 32 * 2 ** 20;

export interface ShellOptions {
  readonly runs: number;
  readonly floodRuns: number;
  readonly floodMiB: number;
}

interface ChildReport {
  readonly wallNs: number;
  readonly rssBefore: number;
  readonly maxRss: number;
  readonly outputChars: number;
  readonly truncated: boolean;
  readonly exitCode: number | null;
}

export async function benchShell(options: ShellOptions): Promise<{ rows: Row[]; notes: string[] }> {
  const pwsh = findPowerShell();
  if (pwsh === undefined) {
    const note = "pwsh not found (findPowerShell()); install it with scripts/install-powershell.sh";
    return {
      rows: ["shell `Write-Output 1`: PowerShellRunner", "shell flood: PowerShellRunner", "shell flood: peak RSS"].map(
        (name) => ({ name, kind: "time", note }),
      ),
      notes: [`shell: skipped, ${note}`],
    };
  }
  const cwd = makeTemp("shell");
  try {
    const runner = new PowerShellRunner({ executable: pwsh });
    const encoded = Buffer.from(`${RUNNER_PRELUDE}Write-Output 1`, "utf16le").toString("base64");
    const checks: string[] = [];
    const expectOne = (variant: string, output: string): void => {
      if (output.trim() !== "1") checks.push(`shell: ${variant} printed ${JSON.stringify(output.slice(0, 80))}`);
    };
    const small = await rounds(
      {
        runner: async () => {
          const start = nowNs();
          const result = await runner.run({ command: "Write-Output 1", cwd });
          const elapsed = nowNs() - start;
          expectOne("runner", result.output);
          return elapsed;
        },
        direct: async () => {
          const result = await spawnDrain(pwsh, [...FLAGS, "-Command", "Write-Output 1"], cwd, true);
          expectOne("direct", result.text);
          return result.wallNs;
        },
        encoded: async () => {
          const result = await spawnDrain(pwsh, [...FLAGS, "-EncodedCommand", encoded], cwd, true);
          expectOne("encoded", result.text);
          return result.wallNs;
        },
      },
      { runs: options.runs, warmup: 1 },
    );

    const flood = floodCommand(options.floodMiB);
    const floodBytes = options.floodMiB * 2 ** 20;
    const reports: { flood: ChildReport[]; baseline: ChildReport[] } = { flood: [], baseline: [] };
    const floods = await rounds(
      {
        raw: async () => {
          const result = await spawnDrain(pwsh, [...FLAGS, "-Command", flood], cwd, false);
          if (result.bytes !== floodBytes) checks.push(`shell: raw flood printed ${result.bytes} bytes`);
          return result.wallNs;
        },
        runner: async () => {
          const report = await runChild(pwsh, options.floodMiB);
          if (!report.truncated || report.exitCode !== 0) checks.push(`shell: runner flood ${JSON.stringify(report)}`);
          reports.flood.push(report);
          return report.wallNs;
        },
        baseline: async () => {
          const report = await runChild(pwsh, 0);
          reports.baseline.push(report);
          return report.wallNs;
        },
      },
      // A flood is slow: no warm-up round (the one-liners above have warmed pwsh and the page cache).
      { runs: options.floodRuns, warmup: 0 },
    );
    const peakFlood = reports.flood.map((report) => report.maxRss);
    const peakBaseline = reports.baseline.map((report) => report.maxRss);
    const growth = summarize(peakFlood).median - summarize(peakBaseline).median;
    const size = `${options.floodMiB >= 1024 ? `${options.floodMiB / 1024} GiB` : `${options.floodMiB} MiB`}`;
    const throughput = (floodBytes / 2 ** 20 / (summarize(floods.runner).median / 1e9)).toFixed(0);
    return {
      rows: [
        {
          name: "shell `Write-Output 1`: PowerShellRunner",
          kind: "time",
          value: summarize(small.runner),
          ratio: ratioText(pairedRatio(small.runner, small.direct), "direct"),
        },
        { name: "shell `Write-Output 1`: spawn pwsh -Command (direct)", kind: "time", value: summarize(small.direct) },
        {
          name: "shell `Write-Output 1`: spawn -EncodedCommand + runner prelude",
          kind: "time",
          value: summarize(small.encoded),
          ratio: ratioText(pairedRatio(small.encoded, small.direct), "direct"),
        },
        {
          name: `shell flood ${size}: PowerShellRunner (in child)`,
          kind: "time",
          value: summarize(floods.runner),
          ratio: ratioText(pairedRatio(floods.runner, floods.raw), "raw"),
        },
        { name: `shell flood ${size}: spawn pwsh, drain stdout`, kind: "time", value: summarize(floods.raw) },
        {
          name: `shell flood ${size}: child peak RSS`,
          kind: "memory",
          value: summarize(peakFlood),
          ratio: ratioText(pairedRatio(peakFlood, peakBaseline), "one-liner"),
          goal: { text: `bounded (≤ one-liner + ${formatValue(RSS_SLACK_BYTES, "memory")})`, met: growth <= RSS_SLACK_BYTES },
        },
        { name: "shell `Write-Output 1` via runner: child peak RSS", kind: "memory", value: summarize(peakBaseline) },
      ],
      notes: [
        `shell: flood through the runner at ${throughput} MiB/s; the runner kept ${reports.flood[0]?.outputChars ?? 0} characters of output; ` +
          `child RSS before the run ${formatValue(summarize(reports.flood.map((report) => report.rssBefore)).median, "memory")}.`,
        ...checks,
      ],
    };
  } finally {
    removeTemp(cwd);
  }
}

/** Spawns and drains a process; `keep` keeps stdout as text (small outputs only). */
function spawnDrain(
  executable: string,
  args: readonly string[],
  cwd: string,
  keep: boolean,
): Promise<{ wallNs: number; bytes: number; text: string }> {
  return new Promise((resolve, reject) => {
    const start = nowNs();
    const child = spawn(executable, args, { cwd, stdio: ["ignore", "pipe", "ignore"] });
    const chunks: Buffer[] = [];
    let bytes = 0;
    child.stdout.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      if (keep) chunks.push(chunk);
    });
    child.once("error", reject);
    child.once("close", () => resolve({ wallNs: nowNs() - start, bytes, text: Buffer.concat(chunks).toString("utf8") }));
  });
}

async function runChild(pwsh: string, mebibytes: number): Promise<ChildReport> {
  const result = await new Promise<{ code: number | null; text: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, pwsh, String(mebibytes)], {
      cwd: REPO,
      stdio: ["ignore", "pipe", "inherit"],
    });
    const chunks: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => chunks.push(chunk));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, text: Buffer.concat(chunks).toString("utf8") }));
  });
  if (result.code !== 0) throw new Error(`shell flood child exited with ${result.code}: ${result.text}`);
  return JSON.parse(result.text) as ChildReport;
}
