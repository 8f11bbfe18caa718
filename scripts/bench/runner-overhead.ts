// The runner's own cost, without PowerShell's start-up noise: PowerShellRunner driving a stand-in
// executable that exits at once (`true`), next to spawning the same executable with the same arguments.
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { PowerShellRunner } from "../../code/chapters/ch03/src/adapters/powershell.js";
import { RUNNER_PRELUDE, spawnDrain } from "./shell-commands.js";
import { nowNs, ratioOfMedians, rounds, summarize } from "./stats.js";
import { formatValue, ratioText, type Row } from "./table.js";

export async function benchRunnerOverhead(options: { readonly runs: number }): Promise<Row[]> {
  const standIn = ["/bin/true", "/usr/bin/true"].find((path) => existsSync(path));
  if (standIn === undefined) {
    return [{ name: "shell runner overhead (stand-in `true`)", kind: "time", note: "no /bin/true on this system" }];
  }
  const cwd = tmpdir();
  const runner = new PowerShellRunner({ executable: standIn });
  // The same arguments the runner builds, so both sides spawn identical command lines.
  const encoded = Buffer.from(`${RUNNER_PRELUDE}Write-Output 1`, "utf16le").toString("base64");
  const args = ["-NoLogo", "-NoProfile", "-NonInteractive", "-EncodedCommand", encoded];
  const samples = await rounds(
    {
      runner: async () => {
        const start = nowNs();
        await runner.run("Write-Output 1", cwd);
        return nowNs() - start;
      },
      direct: async () => (await spawnDrain(standIn, args, cwd, false)).wallNs,
    },
    { runs: options.runs, warmup: 1 },
  );
  const extra = summarize(samples.runner).median - summarize(samples.direct).median;
  return [
    {
      name: "shell runner with stand-in `true` (no pwsh)",
      kind: "time",
      value: summarize(samples.runner),
      ratio: `${ratioText(ratioOfMedians(samples.runner, samples.direct), "direct")} (${extra < 0 ? "−" : "+"}${formatValue(Math.abs(extra), "time")})`,
    },
    { name: "shell spawn `true` directly, same arguments", kind: "time", value: summarize(samples.direct) },
  ];
}
