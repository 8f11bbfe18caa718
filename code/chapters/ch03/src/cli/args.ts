import { parseArgs } from "node:util";

export interface CliOptions {
  readonly help: boolean;
  readonly demo: boolean;
  readonly quiet: boolean;
  readonly prompt?: string;
  readonly workspace?: string;
  readonly model?: string;
  readonly baseUrl?: string;
  readonly maxTurns?: number;
  readonly transcript?: string;
  readonly replay?: string;
}

/** A mistake in how the program was called or configured: exit code 2, the model is never contacted. */
export class ConfigurationError extends Error {
  override readonly name = "ConfigurationError";
}

export function parseCliArgs(argv: readonly string[]): CliOptions {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        help: { type: "boolean", short: "h", default: false },
        demo: { type: "boolean", default: false },
        quiet: { type: "boolean", short: "q", default: false },
        prompt: { type: "string", short: "p" },
        workspace: { type: "string", short: "w" },
        model: { type: "string" },
        "base-url": { type: "string" },
        "max-turns": { type: "string" },
        transcript: { type: "string" },
        replay: { type: "string" },
      },
    }));
  } catch (error) {
    throw new ConfigurationError(`${(error as Error).message}; see --help`);
  }
  return {
    help: values.help,
    demo: values.demo,
    quiet: values.quiet,
    ...optional("prompt", values.prompt),
    ...optional("workspace", values.workspace),
    ...optional("model", values.model),
    ...optional("baseUrl", values["base-url"]),
    ...optional("maxTurns", values["max-turns"] === undefined ? undefined : parseTurns(values["max-turns"])),
    ...optional("transcript", values.transcript),
    ...optional("replay", values.replay),
  };
}

function parseTurns(text: string): number {
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > 1000) {
    throw new ConfigurationError(`--max-turns must be a whole number from 1 to 1000, not "${text}"`);
  }
  return Number(text);
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

export function helpText(entry: string, chapterLine: string): string {
  return `${chapterLine}

用法: npm run ${entry} -- [选项]

  -p, --prompt <text>      交给智能体的任务
  -w, --workspace <dir>    智能体工作的文件夹 (默认: 运行 npm 的目录)
      --model <name>       模型名 (默认: $OPENAI_MODEL 或 gpt-4.1-mini)
      --base-url <url>     OpenAI 兼容接口地址 (默认: $OPENAI_BASE_URL)
      --max-turns <n>      最多调用模型几次 (默认: 20)
      --demo               不需要密钥: 在临时工作区里回放本章的演示
      --replay <file>      用录制的 transcript 代替模型, 离线回放
      --transcript <file>  把整段对话历史写成 JSON
  -q, --quiet              只输出最终回答
  -h, --help               显示本帮助

环境变量: OPENAI_API_KEY (必需, 除非 --demo/--replay), OPENAI_BASE_URL, OPENAI_MODEL。
仓库根目录下的 .env 文件会被自动读取。
`;
}
