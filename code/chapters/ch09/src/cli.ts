import { join, resolve } from "node:path";
import type { Readable, Writable } from "node:stream";
import { ArgumentError, helpText, missingPrompt, parseCliArgs, type CliOptions } from "./cli/args.js";
import { AnswerInput } from "./cli/answer-input.js";
import { askApproval, UNSHOWABLE_REASON } from "./cli/approval-question.js";
import { wrapped } from "./cli/approval-view.js";
import type { DemoSetup } from "./cli/demo.js";
import { demoHooks } from "./cli/demo-hooks.js";
import { liveHooks } from "./cli/live-hooks.js";
import { memoryRows } from "./cli/memory-lines.js";
import {
  MEMORY_QUERY_STATUS,
  modelTextRows,
  progressListener,
  showingModelText,
  SUBAGENT_LEAD,
} from "./cli/progress.js";
import { readPromptFile } from "./cli/prompt-file.js";
import { settingsLine } from "./cli/settings-line.js";
import { Terminal } from "./cli/terminal.js";
import type { RecordedReply } from "./cli/transcript.js";
import { oneLine, shownAnswer, visible, wrapsIntoCliLine } from "./cli/visible.js";
import { workspaceFolder } from "./cli/workspace-folder.js";
import { ConfigurationError, dotEnvInWorkspace, loadSettingsFrom, readDotEnv, settingSources } from "./config.js";
import type { HookRegistry } from "./core/hooks.js";
import { AgentRunError, TurnLifecycleRefusal, type AgentRunner } from "./core/loop.js";
import {
  PermissionDecision,
  type ApprovalProvider,
  type AuditSink,
  type PermissionRequest,
} from "./core/permissions.js";
import type { ModelClient } from "./core/model.js";
import { profileForChapter, UnknownChapterError, type ChapterProfile } from "./core/profiles.js";

// A run loads what it uses when it uses it: `--help`, an argument error and a configuration error load no SDK, no
// yaml and no feature module (the composition root, the demo and the transcript codec import them).
const composition = () => import("./bootstrap.js");
const demoScript = () => import("./cli/demo.js");
const transcripts = () => import("./cli/transcript.js");

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
export { isYes } from "./cli/approval-question.js";

/**
 * Asks on the terminal before each call. With no terminal on stdin nobody can answer, so it
 * refuses without asking: a pipe or a CI job never approves anything by accident.
 */
export class TerminalApprovalProvider implements ApprovalProvider {
  // Read from the start on a terminal, so an answer typed before its question is dropped, not kept for it.
  readonly #answers: AnswerInput | undefined;

  constructor(
    input: Readable,
    private readonly terminal: Terminal,
    inputIsTTY: boolean,
  ) {
    this.#answers = inputIsTTY ? new AnswerInput(input) : undefined;
  }

  async decide(request: PermissionRequest): Promise<PermissionDecision> {
    if (this.#answers === undefined) {
      this.terminal.line("无交互输入，默认拒绝。");
      return new PermissionDecision("deny", "No interactive approval input was available", "terminal-approval");
    }
    // An ordinary call is the book's four lines; any other shows whole, page by page, its command or path last.
    const answer = await askApproval(this.terminal, this.#answers, {
      toolName: request.toolName,
      // The policy always says which ask this settles; the reason is what the person is asked about.
      reason: request.proposedDecision?.reason ?? "",
      arguments: request.prepared.arguments,
    });
    // Answered: the call's running time shows again while it runs.
    this.terminal.resume();
    if (answer === "unshowable") {
      return new PermissionDecision("deny", UNSHOWABLE_REASON, "terminal-approval");
    }
    const allowed = answer === "approved";
    return new PermissionDecision(
      allowed ? "allow" : "deny",
      allowed ? "User approved this tool call" : "User denied this tool call",
      "terminal-approval",
    );
  }

  /** Releases stdin so the process can exit. */
  close(): void {
    this.#answers?.close();
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
  let demo: DemoSetup | undefined;
  let replies: (() => readonly RecordedReply[] | undefined) | undefined;
  /** Chapter 9: whether the answer was printed before memory's extraction ran (set from a callback of the run). */
  const answer = { printed: false };
  let code: number;
  let stopOnSignals: (() => void) | undefined;
  try {
    options = parseCliArgs(argv, entry);
    if (options.help) {
      io.stdout.write(helpText(entry));
      return 0;
    }
    // Reading the terminal from here on drops what was typed while the run started, before any question.
    approval = new TerminalApprovalProvider(io.stdin, terminal, io.stdinIsTTY);
    const profile = profileForChapter(options.chapter ?? 0);
    demo = options.demo ? await (await demoScript()).prepareDemo(profile.chapter) : undefined;
    if (demo) terminal.line(`演示工作区: ${demo.workspace}`);
    const recording =
      options.replay === undefined
        ? undefined
        : await (await transcripts()).readTranscript(resolve(base, options.replay));
    const script = demo?.transcript ?? recording;
    // The folder is checked before the key is read, so a wrong --workspace costs nothing and says so alone.
    const workspace = demo?.workspace ?? workspaceFolder(options.workspace, base);
    // Like --transcript, relative to the folder npm was run from; read before the key, so a wrong file costs nothing.
    const fromFile =
      options.promptFile === undefined ? undefined : await readPromptFile(resolve(base, options.promptFile));
    // A replay that runs hooks answers with the model's own calls and checks what the hooks make of them (a rewrite
    // applied once, as when it was recorded); one without hooks runs each call as the recording says it ran.
    const runsHooks = profile.capabilities.has("hooks");
    const rewrites = script !== undefined && runsHooks ? new (await transcripts()).ReplayRewrites(script) : undefined;
    const turns = script === undefined ? undefined : (await transcripts()).replayedTurns(script, runsHooks);
    // From chapter 6 a subagent's request is answered only from the recorded subagent replies (none, if the
    // recording has no `replies`): the run's own turns never go to a child, nor a child's to the run. Likewise a
    // summary (chapter 8) and each of memory's side queries (chapter 9) from their own.
    const answers =
      turns === undefined
        ? await createModel(options, io, base, terminal)
        : (await composition()).replayModel(turns.turns, {
            cutShort: turns.cutShort,
            subagentTurns: turns.subagentTurns,
            summaryTurns: turns.summaryTurns,
            selectorTurns: turns.selectorTurns,
            extractorTurns: turns.extractorTurns,
            consolidatorTurns: turns.consolidatorTurns,
          });
    const replayed = rewrites?.guard(answers) ?? answers;
    const { DEFAULT_SUBAGENT_SYSTEM_PROMPT } = await import("./features/subagents.js");
    // The demo says what each step is for before its calls run; a real run (or a replay) shows what the model said
    // beside its calls, a subagent's marked as its progress rows are. Like the progress lines, --quiet leaves both out.
    const shown = options.quiet
      ? replayed
      : demo === undefined
        ? showingModelText(replayed, (text, request) => {
            const lead = request.messages[0]?.content === DEFAULT_SUBAGENT_SYSTEM_PROMPT ? SUBAGENT_LEAD : "";
            for (const row of modelTextRows(text, lead)) terminal.line(terminal.dim(row));
          })
        : (await demoScript()).narrated(replayed, (text) => {
            for (const line of visible(text).split("\n")) terminal.line(terminal.dim(line));
          });
    // A subagent's replies (and a summary's, and memory's) are in no history the run keeps: a transcript that is to
    // replay them records them all.
    const recorded =
      options.transcript !== undefined && profile.capabilities.has("subagent")
        ? (await transcripts()).recordReplies(shown)
        : undefined;
    replies = recorded?.replies;
    const model = recorded?.model ?? shown;
    // A recording holds its task, so `--replay` needs no `--prompt`.
    const prompt =
      demo?.prompt ?? options.prompt ?? fromFile ?? recording?.messages.find((m) => m.role === "user")?.content;
    if (prompt === undefined) throw missingPrompt(entry);
    // Only a real model reads .env; said on stderr, with the path and never a value.
    const exposedEnv = script === undefined ? dotEnvInWorkspace(base, workspace) : undefined;
    if (exposedEnv !== undefined) {
      terminal.line(
        `警告: ${visible(exposedEnv)} 在工作区里, 模型可以用工具读到其中的密钥; 把 .env 放到工作区外, 或用 --workspace 指定别的文件夹。`,
      );
    }
    // Chapter 1–3 runs of this snapshot register none: hooks are chapter 4's, and buildAgent refuses them before.
    const hooks = profile.capabilities.has("hooks") ? chapterHooks(terminal, options.demo, profile.chapter) : undefined;
    // Last, so it sees what every other PreToolUse callback made of the call.
    if (rewrites !== undefined) hooks?.register("PreToolUse", rewrites.check);
    const quiet = options.quiet;
    agent = (await composition()).buildAgent(profile, {
      model,
      workspace,
      approvalProvider: approval,
      auditSink: new TerminalAuditSink(terminal),
      ...(hooks === undefined ? {} : { hooks }),
      ...(options.maxTurns === undefined ? {} : { maxTurns: options.maxTurns }),
      ...(options.quiet ? {} : { onEvent: progressListener(terminal) }),
      ...(options.quiet ? {} : { onSubagentEvent: progressListener(terminal, SUBAGENT_LEAD) }),
      // The model reads only `Subagent execution failed`; the person is told why, with --quiet too.
      onSubagentFailure: (error) => {
        terminal.clearStatus();
        inRows(terminal, `${SUBAGENT_LEAD}运行失败: `, oneLine(error instanceof Error ? error.message : String(error)));
      },
      // Files the runtime wrote into the workspace unasked, and each summary: said with --quiet too.
      onArtifact: (notice) => {
        terminal.clearStatus();
        terminal.line(
          notice.type === "published"
            ? `[Artifact] ${oneLine(notice.relativePath)} (${notice.bytes} bytes)`
            : `[Artifact] failed: ${oneLine(notice.reason)}`,
        );
      },
      onSummary: (before, after) => {
        terminal.clearStatus();
        terminal.line(`[Compaction] request history summarized: ${before} -> ${after} bytes`);
      },
      // Chapter 9: what memory injected, saved or could not do, each a model call spent or a file written unasked;
      // said with --quiet too. Its names, descriptions and reasons are escaped and bounded where the rows are made.
      onMemory: (notice) => {
        // A side query is no turn of the run: its own status says what the wait is for (not with --quiet).
        if (notice.type === "querying") {
          if (!quiet) terminal.status(MEMORY_QUERY_STATUS[notice.query]);
          return;
        }
        terminal.clearStatus();
        for (const row of memoryRows(notice)) terminal.line(visible(row));
      },
      // Chapter 9: the answer comes before memory's extraction, which runs after it (its status covers the wait).
      onAnswer: (finalText) => {
        terminal.clearStatus();
        io.stdout.write(`${shownAnswer(finalText)}\n`);
        // Only once it is written: a write that throws leaves the answer to be printed when the run returns.
        answer.printed = true;
      },
    });
    stopOnSignals = exitOnSignals(terminal, demo === undefined ? undefined : demoFolderLine(demo.root));
    const result = await agent.run(prompt);
    terminal.clearStatus();
    if (!answer.printed) io.stdout.write(`${shownAnswer(result.finalText)}\n`);
    code = 0;
  } catch (error) {
    terminal.idle();
    code = await reportFailure(error, terminal);
  } finally {
    stopOnSignals?.();
    approval?.close();
  }
  const history = agent?.history ?? [];
  if (options?.transcript !== undefined && history.length > 0) {
    const path = resolve(base, options.transcript);
    try {
      const rewrittenArguments = agent?.rewrittenArguments;
      const recorded = replies?.();
      if (replies !== undefined && recorded === undefined) {
        terminal.line("警告: 模型的回复太大, transcript 里没有 replies; 用 --replay 回放时子 Agent 会失败。");
      }
      const { writeTranscript } = await transcripts();
      await writeTranscript(path, {
        chapter: options.chapter ?? 0,
        messages: history,
        rewrittenArguments,
        ...(recorded === undefined ? {} : { replies: recorded }),
      });
    } catch (error) {
      terminal.line(`运行失败: cannot write the transcript to ${oneLine(path)}: ${oneLine((error as Error).message)}`);
      if (code === 0) code = 1;
    }
  }
  // The temp folder outlives the run: said last, with --quiet and after a failure too, so the reader can remove it.
  if (demo !== undefined) terminal.line(demoFolderLine(demo.root));
  return code;
}

/**
 * The logging hooks first, so every call shows its line even when a later hook blocks it; then, for chapter 4's
 * demo only, the demo's: a later chapter's demo shows the policy's own decisions, as its book chapter does.
 */
function chapterHooks(terminal: Terminal, demo: boolean, chapter: number): HookRegistry {
  const hooks = liveHooks(terminal);
  if (demo && chapter === 4) for (const { event, callback } of demoHooks()) hooks.register(event, callback);
  return hooks;
}

/**
 * A fixed entry from chapter 5 on: the unified CLI with `run --chapter <profile.chapter>` put in front, so the
 * arguments cannot choose another chapter's capabilities (a second --chapter is an argument error).
 */
export function runProfile(profile: ChapterProfile, argv: readonly string[], io?: CliIO): Promise<number> {
  const chapter = String(profile.chapter);
  return runCli(["run", "--chapter", chapter, ...argv], io, `ch${chapter.padStart(2, "0")}`);
}

/**
 * A SkillError exists only once a run has loaded the skills feature, so only an error whose class is named SkillError
 * (or extends one so named) loads the feature here.
 */
async function isSkillError(error: Error): Promise<boolean> {
  let type: unknown = error.constructor;
  while (typeof type === "function" && type.name !== "SkillError") type = Object.getPrototypeOf(type);
  return typeof type === "function" && error instanceof (await import("./features/skills.js")).SkillError;
}

async function reportFailure(error: unknown, terminal: Terminal): Promise<number> {
  // A workspace Skill that cannot be used is found before any model call, like a missing setting; so is a memory
  // store that cannot be read (chapter 9's TurnLifecycleRefusal, which names the file to fix).
  if (
    error instanceof ConfigurationError ||
    error instanceof TurnLifecycleRefusal ||
    (error instanceof Error && (await isSkillError(error)))
  ) {
    // A replay file's or a setting's text in the message must not start a line of its own either.
    inRows(terminal, "配置错误: ", oneLine(error.message));
    if (error instanceof ConfigurationError && error.hint !== undefined) inRows(terminal, "  ", oneLine(error.hint));
    return 2;
  }
  if (error instanceof AgentRunError || error instanceof ArgumentError || error instanceof UnknownChapterError) {
    // A provider's or model's text in the message must not start a line of its own.
    inRows(terminal, "运行失败: ", oneLine(error.message));
    if (error instanceof ArgumentError && error.hint !== undefined) inRows(terminal, "  ", oneLine(error.hint));
    return 1;
  }
  inRows(terminal, "意外错误: ", oneLine(error instanceof Error ? error.message : String(error)));
  return 1;
}

/**
 * A failure line: `own` (our words) and `text` (a message that may hold a provider's or a replay file's words). When
 * the terminal could wrap it right before something that reads like one of our lines, it is cut into rows of our
 * own (`    | `) instead; otherwise it is one line, as always.
 */
function inRows(terminal: Terminal, own: string, text: string): void {
  if (!wrapsIntoCliLine(text, own)) terminal.line(`${own}${text}`);
  else for (const row of wrapped(`${own}${text}`, 0)) terminal.line(row);
}

/** The demo's last line, after it ends or is interrupted: the temporary folder it leaves, for the reader to remove. */
function demoFolderLine(root: string): string {
  return `演示工作区所在的临时文件夹：${root}（可以删除）。`;
}

/** Exit codes for the signals that end a run: 128 + the signal's number, as a shell reports them. */
const SIGNAL_EXIT_CODES = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 } as const;

/**
 * Ctrl-C, a closed terminal (SIGHUP) or `kill` (SIGTERM) ends the run at once. process.exit runs the
 * PowerShell adapter's exit hook, which kills every running command's process tree: nothing it started
 * outlives the agent. Returns the function that removes the handlers again.
 */
function exitOnSignals(terminal: Terminal, lastLine?: string): () => void {
  const removers = Object.entries(SIGNAL_EXIT_CODES).map(([signal, code]) => {
    const handler = (): void => {
      // No running call's status after this: the process ends here.
      terminal.idle();
      if (signal === "SIGINT") terminal.line("已中断，正在停止本次运行启动的所有命令。");
      // A demo's temporary folder outlives an interrupted run too: the reader is told where it is.
      if (lastLine !== undefined) terminal.line(lastLine);
      process.exit(code);
    };
    process.on(signal, handler);
    return () => process.off(signal, handler);
  });
  return () => removers.forEach((remove) => remove());
}

/**
 * The real model, from the three settings: flags, then the environment, then `.env` (variables already in the
 * environment win over the file, as with every .env loader; a `.env` inside the workspace chooses no endpoint
 * for a key from elsewhere).
 */
async function createModel(options: CliOptions, io: CliIO, base: string, terminal: Terminal): Promise<ModelClient> {
  const dotEnv = {
    path: join(base, ".env"),
    values: readDotEnv(base),
    inWorkspace: dotEnvInWorkspace(base, resolve(base, options.workspace ?? ".")) !== undefined,
  };
  const flags = {
    ...(options.baseUrl === undefined ? {} : { baseURL: options.baseUrl }),
    ...(options.model === undefined ? {} : { model: options.model }),
  };
  const settings = loadSettingsFrom(io.env, dotEnv, flags);
  // Before the first request, with --quiet too: where the key is about to be sent, and who chose that.
  terminal.line(settingsLine(settings, settingSources(io.env, dotEnv, flags)));
  // A retry replaces the waiting line, so a slow provider is not mistaken for a hung agent.
  return (await composition()).openAIModel(settings, (attempt, attempts) => {
    if (!options.quiet) terminal.status(`等待模型回复 (第 ${attempt} 次尝试, 最多 ${attempts} 次)…`);
  });
}
