import { statSync } from "node:fs";
import { createInterface, type Interface } from "node:readline";
import { resolve } from "node:path";
import type { Readable, Writable } from "node:stream";
import { buildAgent, openAIModel, replayModel } from "./bootstrap.js";
import { ArgumentError, helpText, parseCliArgs, type CliOptions } from "./cli/args.js";
import { prepareDemo } from "./cli/demo.js";
import { progressListener } from "./cli/progress.js";
import { Terminal } from "./cli/terminal.js";
import { readTranscript, writeTranscript } from "./cli/transcript.js";
import { visible } from "./cli/visible.js";
import { ConfigurationError, loadSettings, readDotEnv } from "./config.js";
import { AgentRunError, type AgentRunner } from "./core/loop.js";
import {
  PermissionDecision,
  type ApprovalProvider,
  type AuditSink,
  type PermissionRequest,
} from "./core/permissions.js";
import type { ModelClient } from "./core/model.js";
import { profileForChapter, UnknownChapterError } from "./core/profiles.js";

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

/** Only these answers allow a call; anything else, an empty line or end of input refuses it. */
export function isYes(answer: string): boolean {
  return /^(y|yes)$/i.test(answer.trim());
}

/**
 * Asks on the terminal before each call. With no terminal on stdin nobody can answer, so it
 * refuses without asking: a pipe or a CI job never approves anything by accident.
 */
export class TerminalApprovalProvider implements ApprovalProvider {
  #reader: Interface | undefined;
  #lines: AsyncIterator<string> | undefined;

  constructor(
    private readonly input: Readable,
    private readonly terminal: Terminal,
    private readonly inputIsTTY: boolean,
  ) {}

  async decide(request: PermissionRequest): Promise<PermissionDecision> {
    if (!this.inputIsTTY) {
      this.terminal.line("无交互输入，默认拒绝。");
      return new PermissionDecision("deny", "No interactive approval input was available", "terminal-approval");
    }
    this.terminal.line(`工具调用需要批准: ${visible(request.toolName)}`);
    // The policy always says which ask this settles; the reason is what the person is asked about.
    this.terminal.line(`原因: ${visible(request.proposedDecision?.reason ?? "")}`);
    this.terminal.line(`参数: ${visible(JSON.stringify(request.prepared.arguments))}`);
    this.terminal.prompt("允许本次调用? [y/N] ");
    const answer = await this.#nextLine();
    const allowed = answer !== undefined && isYes(answer);
    return new PermissionDecision(
      allowed ? "allow" : "deny",
      allowed ? "User approved this tool call" : "User denied this tool call",
      "terminal-approval",
    );
  }

  /** Releases stdin so the process can exit. */
  close(): void {
    this.#reader?.close();
  }

  async #nextLine(): Promise<string | undefined> {
    if (this.#lines === undefined) {
      this.#reader = createInterface({ input: this.input, crlfDelay: Infinity });
      this.#lines = this.#reader[Symbol.asyncIterator]();
    }
    const next = await this.#lines.next();
    return next.done === true ? undefined : next.value;
  }
}

/** Prints every final permission decision on stderr, one line each, so stdout keeps only the answer. */
export class TerminalAuditSink implements AuditSink {
  constructor(private readonly terminal: Terminal) {}

  record(request: PermissionRequest, decision: PermissionDecision): void {
    this.terminal.line(
      visible(`[Permission] ${request.toolName}: ${decision.behavior} (${decision.source}) - ${decision.reason}`),
    );
  }
}

/**
 * `run --chapter N --prompt …`: one agent session. A fixed entry (`npm run ch01`) puts
 * `run --chapter N` in front and names itself as `entry`. Resolves to the exit code:
 * 0 done, 1 run failed (argument errors included), 2 configuration error.
 */
export async function runCli(argv: readonly string[], io: CliIO = processIO(), entry?: string): Promise<number> {
  const terminal = new Terminal(io.stderr, { interactive: io.stderrIsTTY, color: io.stderrIsTTY && !io.env.NO_COLOR });
  const base = io.env.INIT_CWD ?? io.cwd;
  let approval: TerminalApprovalProvider | undefined;
  let agent: AgentRunner | undefined;
  let options: CliOptions | undefined;
  let code: number;
  try {
    options = parseCliArgs(argv);
    if (options.help) {
      io.stdout.write(helpText(entry));
      return 0;
    }
    const profile = profileForChapter(options.chapter ?? 0);
    const demo = options.demo ? await prepareDemo(profile.chapter) : undefined;
    if (demo) terminal.line(`演示工作区: ${demo.workspace}`);
    const recording = options.replay === undefined ? undefined : await readTranscript(resolve(base, options.replay));
    const script = demo?.transcript ?? recording;
    const model = script === undefined ? createModel(options, io, base) : replayModel(script.messages);
    // A recording holds its task, so `--replay` needs no `--prompt`.
    const prompt = demo?.prompt ?? options.prompt ?? recording?.messages.find((m) => m.role === "user")?.content;
    if (prompt === undefined) throw new ArgumentError("Both --chapter and --prompt are required");
    approval = new TerminalApprovalProvider(io.stdin, terminal, io.stdinIsTTY);
    agent = buildAgent(profile, {
      model,
      workspace: demo?.workspace ?? workspaceFolder(options, base),
      approvalProvider: approval,
      auditSink: new TerminalAuditSink(terminal),
      ...(options.maxTurns === undefined ? {} : { maxTurns: options.maxTurns }),
      ...(options.quiet ? {} : { onEvent: progressListener(terminal) }),
    });
    const result = await agent.run(prompt);
    terminal.clearStatus();
    io.stdout.write(`${visible(result.finalText)}\n`);
    code = 0;
  } catch (error) {
    terminal.clearStatus();
    code = reportFailure(error, terminal);
  } finally {
    approval?.close();
  }
  const history = agent?.history ?? [];
  if (options?.transcript === undefined || history.length === 0) return code;
  const path = resolve(base, options.transcript);
  try {
    await writeTranscript(path, { chapter: options.chapter ?? 0, messages: history });
  } catch (error) {
    terminal.line(`运行失败: cannot write the transcript to ${path}: ${visible((error as Error).message)}`);
    return code === 0 ? 1 : code;
  }
  return code;
}

function reportFailure(error: unknown, terminal: Terminal): number {
  if (error instanceof ConfigurationError) {
    terminal.line(`配置错误: ${visible(error.message)}`);
    if (error.hint !== undefined) terminal.line(`  ${visible(error.hint)}`);
    return 2;
  }
  if (error instanceof AgentRunError || error instanceof ArgumentError || error instanceof UnknownChapterError) {
    terminal.line(`运行失败: ${visible(error.message)}`);
    return 1;
  }
  terminal.line(`意外错误: ${visible(error instanceof Error ? error.message : String(error))}`);
  return 1;
}

/** The real model, from the three settings: flags, then the environment, then `.env`. */
function createModel(options: CliOptions, io: CliIO, base: string): ModelClient {
  // Variables already in the environment win over the file, as with every .env loader.
  const env = { ...readDotEnv(base), ...definedOnly(io.env) };
  return openAIModel(
    loadSettings(env, {
      ...(options.baseUrl === undefined ? {} : { baseURL: options.baseUrl }),
      ...(options.model === undefined ? {} : { model: options.model }),
    }),
  );
}

function definedOnly(env: CliIO["env"]): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined));
}

/** `--workspace`, else the folder the user ran npm from (npm puts it in INIT_CWD). */
function workspaceFolder(options: CliOptions, base: string): string {
  const folder = resolve(base, options.workspace ?? ".");
  let isFolder = false;
  try {
    isFolder = statSync(folder).isDirectory();
  } catch {
    // Reported below.
  }
  if (!isFolder) throw new ArgumentError(`workspace ${folder} is not an existing folder; pass --workspace <dir>`);
  return folder;
}
