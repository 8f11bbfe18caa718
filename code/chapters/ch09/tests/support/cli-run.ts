import { PassThrough } from "node:stream";
import { expect } from "vitest";
import { runCli } from "../../src/cli.js";
import { Sink } from "./sink.js";

/** What one CLI run ended with: its exit code and everything it printed. */
export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * `runCli` in this process, as a program started with no terminal gets it: stdin ended, neither stream a TTY.
 * `argv` is what the entry passes (`run --chapter N …` for a fixed entry, which names itself as `entry`), so the
 * code, the output and the exit code are the program's, without starting one.
 */
export async function runCliWithoutTerminal(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
  entry?: string,
): Promise<CliRun> {
  const [stdout, stderr] = [new Sink(), new Sink()];
  const io = { env, cwd, stdin: new PassThrough().end(), stdinIsTTY: false, stdout, stderr, stderrIsTTY: false };
  const code = await runCli(argv, io, entry);
  return { code, stdout: stdout.text, stderr: afterSettingsLine(stderr.text, argv, env) };
}

/**
 * `stderr` without the line a real run starts with (`模型: … @ host (… 来自 …)`), once that line is checked: for
 * a run whose three settings come from `env` (or from `--base-url` and `--model` in `argv`), it names the model,
 * the host and each source exactly. Runs that read no settings (a replay, a demo, a failure before) have none;
 * a run that read one from a `.env` file keeps its line, for the test to check.
 */
export function afterSettingsLine(
  stderr: string,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): string {
  const flag = (name: string): string | undefined => {
    const index = argv.indexOf(name);
    return index === -1 ? undefined : argv[index + 1];
  };
  const model = flag("--model") ?? env.OPENAI_MODEL ?? "";
  const baseURL = flag("--base-url") ?? env.OPENAI_BASE_URL ?? "";
  // A setting from a .env file names that file: such tests check the line themselves.
  if (!stderr.startsWith("模型: ") || model === "" || baseURL === "" || (env.OPENAI_API_KEY ?? "") === "") {
    return stderr;
  }
  const from = (name: string, value: string | undefined): string => (value === undefined ? "环境变量" : name);
  const [first, ...rest] = stderr.split("\n");
  expect(first).toBe(
    `模型: ${model} @ ${new URL(baseURL).host} (模型来自 ${from("--model", flag("--model"))}, ` +
      `地址来自 ${from("--base-url", flag("--base-url"))}, 密钥来自 环境变量)`,
  );
  return rest.join("\n");
}
