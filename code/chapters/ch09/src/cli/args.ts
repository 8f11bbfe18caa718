/** What `run` was asked to do. */
export interface CliOptions {
  readonly help: boolean;
  readonly demo: boolean;
  readonly quiet: boolean;
  readonly chapter?: number;
  readonly prompt?: string;
  readonly promptFile?: string;
  readonly workspace?: string;
  readonly model?: string;
  readonly baseUrl?: string;
  readonly maxTurns?: number;
  readonly transcript?: string;
  readonly replay?: string;
}

/** A mistake in how the program was called: `运行失败: …`, exit code 1, the model is never contacted. */
export class ArgumentError extends Error {
  override readonly name = "ArgumentError";
  /** A second line for the reader: how to fix it, when the first line alone does not say. */
  readonly hint: string | undefined;

  constructor(message: string, hint?: string) {
    super(message);
    this.hint = hint;
  }
}

/** The book's line for a run without a task, which the unified entry keeps verbatim. */
export const BOTH_REQUIRED = "Both --chapter and --prompt are required";

/** The chapters this snapshot runs: 1 to this one. */
const LAST_CHAPTER = 9;

/** What a run without a task says: a fixed entry already has its chapter, so only the task is missing there. */
export function missingPrompt(entry: string | undefined): ArgumentError {
  if (entry === undefined) return new ArgumentError(BOTH_REQUIRED);
  return new ArgumentError(
    "--prompt is required",
    `npm run ${entry} -- --prompt "<task>" (or --prompt-file <path>); npm run demo:${entry} needs neither`,
  );
}

const VALUE_OPTIONS = {
  "--chapter": "chapter",
  "--prompt": "prompt",
  "-p": "prompt",
  "--prompt-file": "promptFile",
  "--workspace": "workspace",
  "-w": "workspace",
  "--model": "model",
  "--base-url": "baseUrl",
  "--max-turns": "maxTurns",
  "--transcript": "transcript",
  "--replay": "replay",
} as const;

const FLAGS = { "--help": "help", "-h": "help", "--demo": "demo", "--quiet": "quiet", "-q": "quiet" } as const;

type ValueKey = (typeof VALUE_OPTIONS)[keyof typeof VALUE_OPTIONS];
type FlagKey = (typeof FLAGS)[keyof typeof FLAGS];

/**
 * `run --chapter N --prompt …` and the options kept beyond the book; `--name=value` works too. A fixed entry
 * (`entry`, say `ch01`) has put `run --chapter N` in front, so its errors name only what its reader typed.
 */
export function parseCliArgs(argv: readonly string[], entry?: string): CliOptions {
  const flags: Record<FlagKey, boolean> = { help: false, demo: false, quiet: false };
  const values: Partial<Record<ValueKey, string>> = {};
  let command: string | undefined;
  for (let index = 0; index < argv.length; index += 1) {
    const arg = argv[index] as string;
    const [name, inline] = splitInline(arg);
    // Own keys only: `constructor` or `__proto__` must be an unknown argument, not a flag.
    if (Object.hasOwn(FLAGS, name) && inline === undefined) {
      flags[FLAGS[name as keyof typeof FLAGS]] = true;
    } else if (Object.hasOwn(VALUE_OPTIONS, name)) {
      const key = VALUE_OPTIONS[name as keyof typeof VALUE_OPTIONS];
      const value = inline ?? argv[(index += 1)];
      if (value === undefined) throw new ArgumentError(`Missing value for ${name}`);
      if (values[key] !== undefined) throw givenTwice(name, key, entry);
      values[key] = value;
    } else if (command === undefined && !arg.startsWith("-")) {
      command = arg;
    } else {
      // `--prompt (Get-Content f)` or an unquoted prompt arrives as several arguments: say how to pass one.
      throw new ArgumentError(`Unknown argument: ${arg}`, STRAY_HINT);
    }
  }
  if (flags.help) return { ...flags };
  if (command !== "run") throw new ArgumentError("Expected command: run");
  // --demo and --replay bring their own task, so only they may leave out --prompt.
  const needsPrompt = !flags.demo && values.replay === undefined;
  const hasPrompt = values.prompt !== undefined || values.promptFile !== undefined;
  if (values.chapter === undefined) {
    if (needsPrompt) throw new ArgumentError(BOTH_REQUIRED);
    throw new ArgumentError(
      "--chapter is required",
      `${flags.demo ? "--demo" : "--replay"} needs no --prompt, but the chapter to run: --chapter N (1 to ${LAST_CHAPTER})`,
    );
  }
  if (needsPrompt && !hasPrompt) throw missingPrompt(entry);
  // The demo's task and temporary workspace are its own: a reader's would be silently ignored.
  const ignored = (["--workspace", "--prompt", "--prompt-file", "--replay"] as const).filter(
    (name) => flags.demo && values[VALUE_OPTIONS[name]] !== undefined,
  );
  if (ignored.length > 0) {
    throw new ArgumentError(
      `--demo brings its own task and temporary workspace: leave out ${ignored.join(" and ")}`,
      entry === undefined ? undefined : `the demo alone: npm run demo:${entry}`,
    );
  }
  if (values.prompt !== undefined && values.promptFile !== undefined) {
    throw new ArgumentError("--prompt and --prompt-file cannot be used together");
  }
  return {
    ...flags,
    chapter: chapterNumber(values.chapter),
    ...optional("prompt", values.prompt),
    ...optional("promptFile", values.promptFile),
    ...optional("workspace", values.workspace),
    ...optional("model", values.model),
    ...optional("baseUrl", values.baseUrl),
    ...optional(
      "maxTurns",
      values.maxTurns === undefined ? undefined : wholeNumber("--max-turns", values.maxTurns, 1, 1000),
    ),
    ...optional("transcript", values.transcript),
    ...optional("replay", values.replay),
  };
}

const STRAY_HINT =
  'a prompt of several words or lines needs quotes (--prompt "…"), or put it in a file: --prompt-file <path>';

/** The fixed entry's own --chapter came first: a second one is the reader asking for another chapter. */
function givenTwice(name: string, key: ValueKey, entry: string | undefined): ArgumentError {
  if (key !== "chapter" || entry === undefined) return new ArgumentError(`Argument given twice: ${name}`);
  return new ArgumentError(
    `npm run ${entry} always runs its own chapter; --chapter is for the unified entry`,
    'to choose the chapter, use npm run agent-tutorial -- run --chapter N --prompt "<task>"',
  );
}

function splitInline(arg: string): [string, string | undefined] {
  const at = arg.indexOf("=");
  return arg.startsWith("--") && at > 2 ? [arg.slice(0, at), arg.slice(at + 1)] : [arg, undefined];
}

/** `5`, `05` or `ch05` (as the chapter's own script is named); a number past this snapshot's is the profiles' to refuse. */
function chapterNumber(text: string): number {
  const match = /^(?:ch)?(\d{1,2})$/i.exec(text);
  const chapter = match === null ? 0 : Number(match[1]);
  if (chapter < 1) {
    throw new ArgumentError(
      `--chapter must be a chapter number from 1 to ${LAST_CHAPTER} (${LAST_CHAPTER} or ch0${LAST_CHAPTER}), not "${text.slice(0, 40)}"`,
    );
  }
  return chapter;
}

function wholeNumber(name: string, text: string, min: number, max: number): number {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new ArgumentError(`${name} must be a whole number from ${min} to ${max}, not "${text.slice(0, 40)}"`);
  }
  return Number(text);
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

/** `entry` is how the reader started us: `ch01` for a fixed entry, else the unified one. */
export function helpText(entry: string | undefined): string {
  const usage =
    entry === undefined
      ? "npm run agent-tutorial -- run --chapter <1|2|3|4|5|6|7|8|9> --prompt <text> [选项]"
      : `npm run ${entry} -- --prompt <text> [选项]`;
  // A fixed entry has its chapter already: its help offers no --chapter, and names its demo script.
  const chapter =
    entry === undefined ? "\n      --chapter <n>        用第 n 章的配置运行 (固定入口 npm run chNN 已经带上)" : "";
  const demo = entry === undefined ? "" : ` (或 npm run demo:${entry})`;
  return `用法: ${usage}
${chapter}
  -p, --prompt <text>      交给智能体的任务
      --prompt-file <file> 从文件读任务 (UTF-8 或 UTF-16, 最大 1 MiB; 多行任务用它)
  -w, --workspace <dir>    智能体工作的文件夹 (默认: 运行 npm 的目录)
      --model <name>       模型名 (代替 OPENAI_MODEL)
      --base-url <url>     OpenAI 兼容接口地址 (代替 OPENAI_BASE_URL)
      --max-turns <n>      主 Agent 最多调用模型几次 (默认: 20); 另外每个 task 子 Agent
                           各自最多调用 30 次, 每次运行最多 20 个子 Agent; 主 Agent 的历史
                           超过 50000 字节时, 每轮之前还多调用一次来生成摘要
                           一次调用遇到 429、5xx 或断线时, 最多再发 2 次请求 (重试)
      --demo               不需要密钥: 在临时工作区里回放本章的演示${demo}
      --replay <file>      用录制的 transcript 代替模型, 离线回放
      --transcript <file>  把整段对话历史写成 JSON
  -q, --quiet              只输出最终回答
  -h, --help               显示本帮助

需要的设置 (环境变量, 或运行 npm 的目录下的 .env): OPENAI_BASE_URL、OPENAI_API_KEY、OPENAI_MODEL;
--demo 和 --replay 不需要。
`;
}
