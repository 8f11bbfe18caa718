/** What `run` was asked to do. */
export interface CliOptions {
  readonly help: boolean;
  readonly demo: boolean;
  readonly quiet: boolean;
  readonly chapter?: number;
  readonly prompt?: string;
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
}

const VALUE_OPTIONS = {
  "--chapter": "chapter",
  "--prompt": "prompt",
  "-p": "prompt",
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

/** `run --chapter N --prompt …` and the options kept beyond the book; `--name=value` works too. */
export function parseCliArgs(argv: readonly string[]): CliOptions {
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
      if (values[key] !== undefined) throw new ArgumentError(`Argument given twice: ${name}`);
      values[key] = value;
    } else if (command === undefined && !arg.startsWith("-")) {
      command = arg;
    } else {
      throw new ArgumentError(`Unknown argument: ${arg}`);
    }
  }
  if (flags.help) return { ...flags };
  if (command !== "run") throw new ArgumentError("Expected command: run");
  // --demo and --replay bring their own task, so only they may leave out --prompt.
  const needsPrompt = !flags.demo && values.replay === undefined;
  if (values.chapter === undefined || (needsPrompt && values.prompt === undefined)) {
    throw new ArgumentError("Both --chapter and --prompt are required");
  }
  return {
    ...flags,
    chapter: wholeNumber("--chapter", values.chapter, 1, 99),
    ...optional("prompt", values.prompt),
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

function splitInline(arg: string): [string, string | undefined] {
  const at = arg.indexOf("=");
  return arg.startsWith("--") && at > 2 ? [arg.slice(0, at), arg.slice(at + 1)] : [arg, undefined];
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
      ? "npm run agent-tutorial -- run --chapter <1|2|3|4|5> --prompt <text> [选项]"
      : `npm run ${entry} -- --prompt <text> [选项]`;
  return `用法: ${usage}

      --chapter <n>        用第 n 章的配置运行 (固定入口 npm run chNN 已经带上)
  -p, --prompt <text>      交给智能体的任务
  -w, --workspace <dir>    智能体工作的文件夹 (默认: 运行 npm 的目录)
      --model <name>       模型名 (代替 OPENAI_MODEL)
      --base-url <url>     OpenAI 兼容接口地址 (代替 OPENAI_BASE_URL)
      --max-turns <n>      最多调用模型几次 (默认: 20)
      --demo               不需要密钥: 在临时工作区里回放本章的演示
      --replay <file>      用录制的 transcript 代替模型, 离线回放
      --transcript <file>  把整段对话历史写成 JSON
  -q, --quiet              只输出最终回答
  -h, --help               显示本帮助

需要的设置 (环境变量, 或运行 npm 的目录下的 .env): OPENAI_BASE_URL、OPENAI_API_KEY、OPENAI_MODEL;
--demo 和 --replay 不需要。
`;
}
