import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import type { Readable, Writable } from "node:stream";
import { buildAgent, openAIModel, replayModel } from "./bootstrap.js";
import { ConfigurationError, helpText, parseCliArgs, type CliOptions } from "./cli/args.js";
import { prepareDemo } from "./cli/demo.js";
import { progressListener } from "./cli/progress.js";
import { Terminal } from "./cli/terminal.js";
import { TerminalApprovalProvider } from "./cli/terminal-approval.js";
import { readTranscript, writeTranscript } from "./cli/transcript.js";
import { visible } from "./cli/visible.js";
import { AgentRunError } from "./core/agent-errors.js";
import type { ChatMessage } from "./core/messages.js";
import type { ModelClient } from "./core/model-client.js";
import type { ChapterProfile } from "./core/profiles.js";

export const DEFAULT_MODEL = "gpt-4.1-mini";

/** Everything the CLI touches from the outside world, injectable for tests. */
export interface CliIO {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  readonly stdin: Readable;
  readonly stdinIsTTY: boolean;
  readonly stdout: Writable;
  readonly stderr: Writable;
  readonly stderrIsTTY: boolean;
}

/** The real process: its environment, folder and standard streams. */
export function processIO(): CliIO {
  // Node's types claim `isTTY` is always a boolean; on a pipe it is simply absent.
  const isTTY = (stream: { isTTY?: boolean }): boolean => stream.isTTY === true;
  // A .env where npm runs (the repository root) holds the key for readers who prefer a file.
  if (existsSync(".env")) process.loadEnvFile(".env");
  // `… --help | head` closes the pipe early: that ends the output, it is not a crash.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    process.exit(0);
  });
  return {
    env: process.env,
    cwd: process.cwd(),
    stdin: process.stdin,
    stdinIsTTY: isTTY(process.stdin),
    stdout: process.stdout,
    stderr: process.stderr,
    stderrIsTTY: isTTY(process.stderr),
  };
}

export interface CliEntry {
  /** npm script name, e.g. `ch01`. */
  readonly name: string;
  readonly title: string;
  readonly profile: ChapterProfile;
}

/** Runs one agent session; resolves to the exit code: 0 done, 1 run error, 2 configuration error. */
export async function runCli(argv: readonly string[], io: CliIO, entry: CliEntry): Promise<number> {
  const color = io.stderrIsTTY && !io.env.NO_COLOR;
  const terminal = new Terminal(io.stderr, { interactive: io.stderrIsTTY, color });
  let approval: TerminalApprovalProvider | undefined;
  let history: readonly ChatMessage[] = [];
  let options: CliOptions | undefined;
  let code: number;
  try {
    options = parseCliArgs(argv);
    if (options.help) {
      io.stdout.write(helpText(entry.name, entry.title));
      return 0;
    }
    const demo = options.demo ? await prepareDemo() : undefined;
    if (demo) terminal.line(`演示工作区: ${demo.workspace}`);
    const prompt = demo?.prompt ?? options.prompt;
    if (prompt === undefined || prompt.trim() === "") {
      throw new ConfigurationError("--prompt is required (or use --demo); see --help");
    }
    const model = demo ? replayModel(demo.transcript.messages) : await createModel(options, io);
    approval = new TerminalApprovalProvider(io.stdin, terminal, io.stdinIsTTY);
    const agent = buildAgent(entry.profile, {
      model,
      workspace: demo?.workspace ?? workspaceFolder(options, io),
      approvalProvider: approval,
      ...(options.maxTurns === undefined ? {} : { maxTurns: options.maxTurns }),
      ...(options.quiet ? {} : { onEvent: progressListener(terminal) }),
    });
    const result = await agent.run(prompt);
    history = result.history;
    terminal.clearStatus();
    io.stdout.write(`${visible(result.finalText)}\n`);
    code = 0;
  } catch (error) {
    terminal.clearStatus();
    if (error instanceof AgentRunError) history = error.history;
    code = reportFailure(error, terminal);
  } finally {
    approval?.close();
  }
  if (options?.transcript === undefined || history.length === 0) return code;
  const path = resolve(io.env.INIT_CWD ?? io.cwd, options.transcript);
  try {
    await writeTranscript(path, { chapter: entry.profile.chapter, messages: history });
  } catch (error) {
    terminal.line(`运行失败: cannot write the transcript to ${path}: ${visible((error as Error).message)}`);
    return code === 0 ? 1 : code;
  }
  return code;
}

function reportFailure(error: unknown, terminal: Terminal): number {
  if (error instanceof ConfigurationError) {
    terminal.line(`配置错误: ${visible(error.message)}`);
    return 2;
  }
  if (error instanceof AgentRunError) {
    terminal.line(`运行失败: ${visible(error.message)}`);
    return 1;
  }
  terminal.line(`意外错误: ${visible(error instanceof Error ? error.message : String(error))}`);
  return 1;
}

async function createModel(options: CliOptions, io: CliIO): Promise<ModelClient> {
  const { env } = io;
  if (options.replay !== undefined) {
    // Relative to where the user ran npm, like --transcript, so a recording replays from the same folder.
    return replayModel((await readTranscript(resolve(env.INIT_CWD ?? io.cwd, options.replay))).messages);
  }
  const apiKey = env.OPENAI_API_KEY?.trim();
  if (!apiKey) {
    throw new ConfigurationError(
      "OPENAI_API_KEY is not set: put it in .env or the environment (see README, Providers), or try --demo without a key",
    );
  }
  const baseURL = options.baseUrl ?? (env.OPENAI_BASE_URL?.trim() || undefined);
  if (baseURL !== undefined && !URL.canParse(baseURL)) {
    const source = options.baseUrl === undefined ? "OPENAI_BASE_URL" : "--base-url";
    throw new ConfigurationError(`${source} is not a URL: "${baseURL}"`);
  }
  const model = options.model ?? (env.OPENAI_MODEL?.trim() || DEFAULT_MODEL);
  return openAIModel({ apiKey, model, ...(baseURL === undefined ? {} : { baseURL }) });
}

/** `--workspace`, else the folder the user ran npm from (npm puts it in INIT_CWD). */
function workspaceFolder(options: CliOptions, io: CliIO): string {
  const base = io.env.INIT_CWD ?? io.cwd;
  const folder = resolve(base, options.workspace ?? ".");
  let isFolder = false;
  try {
    isFolder = statSync(folder).isDirectory();
  } catch {
    // Reported below.
  }
  if (!isFolder) throw new ConfigurationError(`workspace ${folder} is not an existing folder; pass --workspace <dir>`);
  return folder;
}
