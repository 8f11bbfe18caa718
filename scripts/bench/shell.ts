// shell: the runner against pwsh on a one-liner, and a ~1 GiB flood (wall time, peak RSS in a child process).
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import {
  findPowerShell,
  OUTPUT_CAP_CHARS,
  PowerShellRunner,
} from "../../code/chapters/ch03/src/adapters/powershell.js";
import { RUNNER_PRELUDE, spawnDrain } from "./shell-commands.js";
import { nowNs, ratioOfMedians, rounds, summarize } from "./stats.js";
import { formatValue, ratioText, type Row } from "./table.js";
import { makeTemp, removeTemp } from "./temp.js";

const FLAGS = ["-NoLogo", "-NoProfile", "-NonInteractive"];
const CHILD = fileURLToPath(new URL("./shell-flood-child.ts", import.meta.url));
const REPO = fileURLToPath(new URL("../../", import.meta.url));
/** Peak RSS may exceed the one-liner's by this much and still count as bounded (the runner keeps 50,000 characters). */
const RSS_SLACK_BYTES = 64 * 2 ** 20;

export interface ShellOptions {
  readonly runs: number;
  readonly floodRuns: number;
  readonly floodMiB: number;
}

/** What shell-flood-child.ts prints. */
interface ChildReport {
  readonly wallNs: number;
  readonly rssBefore: number;
  readonly maxRss: number;
  /** Characters of output kept (`output.length`); for `raw`, bytes counted. */
  readonly outputChars: number;
  readonly outputBytes: number;
  readonly truncated: boolean;
  readonly exitCode: number | null;
}

type ChildKind = "runner" | "raw" | "baseline";

export async function benchShell(options: ShellOptions): Promise<{ rows: Row[]; notes: string[] }> {
  const pwsh = findPowerShell();
  if (pwsh === undefined) {
    const note = "pwsh not found (findPowerShell()); install it with scripts/install-powershell.sh";
    const names = [
      "shell `Write-Output 1`: PowerShellRunner",
      "shell flood: PowerShellRunner",
      "shell flood: peak RSS",
    ];
    return { rows: names.map((name) => ({ name, kind: "time", note })), notes: [`shell: skipped, ${note}`] };
  }
  const cwd = makeTemp("shell");
  try {
    const checks: string[] = [];
    const small = await oneLiners(pwsh, cwd, options.runs, checks);
    const floodBytes = options.floodMiB * 2 ** 20;
    const reports: Record<ChildKind, ChildReport[]> = { runner: [], raw: [], baseline: [] };
    const child = (kind: ChildKind, mebibytes: number) => async (): Promise<number> => {
      const report = await runChild(pwsh, mebibytes, kind === "baseline" ? "runner" : kind);
      reports[kind].push(report);
      // raw must see every byte; the runner must keep exactly its cap of a flood and say it dropped the rest.
      const wrongSize =
        kind === "raw"
          ? report.outputBytes !== floodBytes
          : kind === "runner" && (report.outputChars !== OUTPUT_CAP_CHARS || !report.truncated);
      if (report.exitCode !== 0 || wrongSize || (kind === "baseline" && report.truncated)) {
        checks.push(`shell: unexpected ${kind} report ${JSON.stringify(report)}`);
      }
      return report.wallNs;
    };
    // Every flood runs in a fresh node process, so both sides start from the same heap. A flood is slow:
    // no warm-up round (the one-liners above have warmed pwsh and the page cache).
    const floods = await rounds(
      {
        raw: child("raw", options.floodMiB),
        runner: child("runner", options.floodMiB),
        baseline: child("baseline", 0),
      },
      { runs: options.floodRuns, warmup: 0 },
    );
    const peak = (kind: ChildKind): number[] => reports[kind].map((report) => report.maxRss);
    const growth = summarize(peak("runner")).median - summarize(peak("baseline")).median;
    const size = options.floodMiB >= 1024 ? `${options.floodMiB / 1024} GiB` : `${options.floodMiB} MiB`;
    const throughput = (wallNs: number[]): string =>
      (floodBytes / 2 ** 20 / (summarize(wallNs).median / 1e9)).toFixed(0);
    return {
      rows: [
        {
          name: "shell `Write-Output 1`: PowerShellRunner",
          kind: "time",
          value: summarize(small.runner),
          ratio: ratioText(ratioOfMedians(small.runner, small.direct), "direct"),
        },
        { name: "shell `Write-Output 1`: spawn pwsh -Command (direct)", kind: "time", value: summarize(small.direct) },
        {
          name: "shell `Write-Output 1`: spawn -EncodedCommand + runner prelude",
          kind: "time",
          value: summarize(small.encoded),
          ratio: ratioText(ratioOfMedians(small.encoded, small.direct), "direct"),
        },
        {
          name: `shell flood ${size}: PowerShellRunner`,
          kind: "time",
          value: summarize(floods.runner),
          ratio: ratioText(ratioOfMedians(floods.runner, floods.raw), "raw"),
        },
        { name: `shell flood ${size}: spawn pwsh, only count bytes (raw)`, kind: "time", value: summarize(floods.raw) },
        {
          name: `shell flood ${size}: peak RSS, runner`,
          kind: "memory",
          value: summarize(peak("runner")),
          ratio: `${ratioText(ratioOfMedians(peak("runner"), peak("baseline")), "one-liner")}; ${ratioText(ratioOfMedians(peak("runner"), peak("raw")), "raw")}`,
          goal: { text: `≤ one-liner + ${formatValue(RSS_SLACK_BYTES, "memory")}`, met: growth <= RSS_SLACK_BYTES },
        },
        { name: `shell flood ${size}: peak RSS, raw`, kind: "memory", value: summarize(peak("raw")) },
        { name: "shell `Write-Output 1`: peak RSS, runner", kind: "memory", value: summarize(peak("baseline")) },
      ],
      notes: [
        `shell: each flood and its peak RSS come from a fresh \`node --import tsx\` child (RSS before the run ` +
          `${formatValue(summarize(reports.runner.map((report) => report.rssBefore)).median, "memory")}); ` +
          `throughput ${throughput(floods.runner)} MiB/s through the runner, ${throughput(floods.raw)} MiB/s raw; ` +
          `the runner kept ${reports.runner[0]?.outputChars ?? 0} characters (${reports.runner[0]?.outputBytes ?? 0} bytes) ` +
          `of ${floodBytes} bytes and dropped the rest (OUTPUT_CAP_CHARS = ${OUTPUT_CAP_CHARS}).`,
        ...checks,
      ],
    };
  } finally {
    removeTemp(cwd);
  }
}

/** `Write-Output 1` three ways: through the runner, spawned plainly, and spawned with the runner's arguments. */
function oneLiners(
  pwsh: string,
  cwd: string,
  runs: number,
  checks: string[],
): Promise<Record<"runner" | "direct" | "encoded", number[]>> {
  const runner = new PowerShellRunner({ executable: pwsh });
  const encoded = Buffer.from(`${RUNNER_PRELUDE}Write-Output 1`, "utf16le").toString("base64");
  const expectOne = (variant: string, output: string): void => {
    if (output.trim() !== "1") checks.push(`shell: ${variant} printed ${JSON.stringify(output.slice(0, 80))}`);
  };
  const spawned = (variant: string, args: readonly string[]) => async (): Promise<number> => {
    const result = await spawnDrain(pwsh, [...FLAGS, ...args], cwd, true);
    expectOne(variant, result.text);
    return result.wallNs;
  };
  return rounds(
    {
      runner: async () => {
        const start = nowNs();
        const result = await runner.run("Write-Output 1", cwd);
        const elapsed = nowNs() - start;
        expectOne("runner", result.output);
        return elapsed;
      },
      direct: spawned("direct", ["-Command", "Write-Output 1"]),
      encoded: spawned("encoded", ["-EncodedCommand", encoded]),
    },
    { runs, warmup: 1 },
  );
}

async function runChild(pwsh: string, mebibytes: number, mode: "runner" | "raw"): Promise<ChildReport> {
  const result = await new Promise<{ code: number | null; text: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, pwsh, String(mebibytes), mode], {
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
