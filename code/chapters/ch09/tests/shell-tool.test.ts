import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { OutputBuffer } from "../src/adapters/output-buffer.js";
import {
  COMMAND_ENVIRONMENT_NAMES,
  commandEnvironment,
  CREDENTIAL_VALUE_PATTERNS,
  looksLikeCredential,
  PowerShellRunner,
} from "../src/adapters/powershell.js";
import type { CommandResult, CommandRunner } from "../src/core/commands.js";
import { toolCall } from "../src/core/messages.js";
import { ToolRegistry, type ToolContext, type ToolResult } from "../src/core/tools.js";
import { createChapterOneTools, createShellTool, shellInputSchema } from "../src/features/builtin-tools.js";
import { commandResult, FakeCommandRunner, unstartableRunner } from "./support/fakes.js";
import { powershell } from "./support/powershell.js";
import { SHELL_TOOL } from "./support/shell-tool.js";

let workspace: string;
beforeAll(async () => {
  workspace = await realpath(await mkdtemp(join(tmpdir(), "ch01-shell-")));
});
afterAll(async () => {
  await rm(workspace, { recursive: true, force: true });
});

/** What the model reads for one shell call of `command`, run by `runner` in the workspace. */
async function shell(runner: CommandRunner, command: string): Promise<ToolResult> {
  const tools = createChapterOneTools(runner);
  const prepared = tools.prepare(toolCall("c1", "shell", JSON.stringify({ command })));
  if (prepared.error !== undefined) throw new Error(prepared.error.content);
  const context: ToolContext = { workspace, identity: "user" };
  return tools.invoke(prepared, context);
}

describe("the shell tool", () => {
  it("is the book's definition: name, description, strict schema, execute effect", () => {
    const tool = createShellTool(new FakeCommandRunner());
    expect(tool.name).toBe("shell");
    expect(tool.description).toBe("Run a PowerShell command in the current workspace.");
    expect(tool.inputSchema).toBe(shellInputSchema);
    expect(tool.effect).toBe("execute");
    expect(shellInputSchema.safeParse({ command: "Get-Date" })).toStrictEqual({
      success: true,
      data: { command: "Get-Date" },
    });
    expect(shellInputSchema.safeParse({ command: "" }).success).toBe(false);
    expect(shellInputSchema.safeParse({ command: "x", cwd: "/" }).success).toBe(false);
  });

  it("shows the model a JSON Schema that keeps $schema, minLength: 1 and additionalProperties: false", () => {
    expect(createChapterOneTools(new FakeCommandRunner()).openAITools()).toStrictEqual([SHELL_TOOL]);
  });

  it("hands the runner the command and the workspace, once", async () => {
    const runner = new FakeCommandRunner(commandResult({ output: "42" }));
    expect(await shell(runner, "Write-Output 42")).toStrictEqual({ content: "42", isError: false });
    expect(runner.calls).toStrictEqual([{ command: "Write-Output 42", cwd: workspace }]);
  });

  it.each<[string, Parameters<typeof commandResult>[0], ToolResult]>([
    ["output, exit 0", { output: "a\nb" }, { content: "a\nb", isError: false }],
    ["no output, exit 0", { output: "" }, { content: "(no output)", isError: false }],
    ["truncated output", { output: "head", truncated: true }, { content: "head\n[output truncated]", isError: false }],
    [
      "a timeout, with no prefix before the output",
      { output: "partial", exitCode: null, timedOut: true },
      { content: "Error [shell_timeout]: partial", isError: true, errorCode: "shell_timeout" },
    ],
    [
      "a timeout with no output",
      { output: "", exitCode: null, timedOut: true },
      { content: "Error [shell_timeout]: (no output)", isError: true, errorCode: "shell_timeout" },
    ],
    [
      "a timeout after truncated output",
      { output: "head", exitCode: null, timedOut: true, truncated: true },
      { content: "Error [shell_timeout]: head\n[output truncated]", isError: true, errorCode: "shell_timeout" },
    ],
    [
      "a non-zero exit code",
      { output: "boom", exitCode: 1 },
      {
        content: "Error [shell_failed]: PowerShell exited with code 1\nboom",
        isError: true,
        errorCode: "shell_failed",
      },
    ],
    [
      "a non-zero exit code and no output",
      { output: "", exitCode: 3 },
      {
        content: "Error [shell_failed]: PowerShell exited with code 3\n(no output)",
        isError: true,
        errorCode: "shell_failed",
      },
    ],
    [
      "a non-zero exit code after truncated output",
      { output: "head", exitCode: 2, truncated: true },
      {
        content: "Error [shell_failed]: PowerShell exited with code 2\nhead\n[output truncated]",
        isError: true,
        errorCode: "shell_failed",
      },
    ],
    [
      "a process killed from outside (no exit code, no timeout)",
      { output: "partial", exitCode: null },
      {
        content: "Error [shell_failed]: PowerShell was killed before it exited\npartial",
        isError: true,
        errorCode: "shell_failed",
      },
    ],
  ])("turns %s into the exact tool result", async (_name, fields, expected) => {
    expect(await shell(new FakeCommandRunner(commandResult(fields)), "x")).toStrictEqual(expected);
  });

  it("a runner that cannot start a process gives shell_start_failed, without the runner's message", async () => {
    expect(await shell(unstartableRunner(), "x")).toStrictEqual({
      content: "Error [shell_start_failed]: PowerShell process could not be started",
      isError: true,
      errorCode: "shell_start_failed",
    });
  });
});

describe("a handler's invalid return value", () => {
  it.each<[string, unknown]>([
    ["a bare string", "42"],
    ["an error without its code", { content: "x", isError: true }],
    ["undefined", undefined],
  ])("%s reaches the model as invalid_tool_result", async (_name, returned) => {
    const registry = new ToolRegistry();
    registry.register({
      name: "broken",
      description: "returns something that is not a ToolResult",
      inputSchema: z.strictObject({}),
      effect: "read",
      handler: () => Promise.resolve(returned as ToolResult),
    });
    const prepared = registry.prepare(toolCall("c1", "broken", "{}"));
    if (prepared.error !== undefined) throw new Error(prepared.error.content);
    expect(await registry.invoke(prepared, { workspace, identity: "user" })).toStrictEqual({
      content: "Error [invalid_tool_result]: Tool handler returned an invalid result",
      isError: true,
      errorCode: "invalid_tool_result",
    });
  });
});

describe.skipIf(powershell === undefined)("the shell tool over real PowerShell", () => {
  // One call end to end, tool over the real runner; what the runner returns for every other case is in
  // powershell-runner.test.ts, and what the tool makes of exactly those results is in the table below.
  it("the output of Write-Output 42 reaches the model as 42", async () => {
    expect(await shell(new PowerShellRunner(), "Write-Output 42")).toStrictEqual({ content: "42", isError: false });
  });
});

const FLOOD_KEPT = `HEAD\n${"x".repeat(50_000 - 5)}`;

describe("what the tool makes of the results real PowerShell returns (powershell-runner.test.ts)", () => {
  it.each<[string, CommandResult, ToolResult]>([
    [
      "Write-Output x; exit 4",
      { output: "x", exitCode: 4, timedOut: false, truncated: false },
      { content: "Error [shell_failed]: PowerShell exited with code 4\nx", isError: true, errorCode: "shell_failed" },
    ],
    [
      "$null",
      { output: "", exitCode: 0, timedOut: false, truncated: false },
      { content: "(no output)", isError: false },
    ],
    [
      "Write-Output ''; Write-Output ''",
      { output: "", exitCode: 0, timedOut: false, truncated: false },
      { content: "(no output)", isError: false },
    ],
    [
      "a timed-out sh that printed its background sleep's pid",
      { output: "4242", exitCode: null, timedOut: true, truncated: false },
      { content: "Error [shell_timeout]: 4242", isError: true, errorCode: "shell_timeout" },
    ],
    [
      "a 2 MB flood after HEAD",
      { output: FLOOD_KEPT, exitCode: 0, timedOut: false, truncated: true },
      { content: `${FLOOD_KEPT}\n[output truncated]`, isError: false },
    ],
  ])("%s", async (_command, result, expected) => {
    expect(await shell(new FakeCommandRunner(result), "x")).toStrictEqual(expected);
  });
});

// Issue 22, item 8: credentials under names no list of secret-sounding names had. A command needs none of them.
const JWT =
  "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFkYSJ9." +
  "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
const PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAplanted\n-----END RSA PRIVATE KEY-----\n";
const TOKEN_URL = "https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o/r.git";
const NPMRC = "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=npm_a1B2c3D4e5F6g7H8i9J0\n";
const ITEM_8: readonly (readonly [string, string, string])[] = [
  ["a JWT", "MY_VAR", JWT],
  ["a bearer token with no Authorization name", "UPSTREAM_HEADER", "Bearer sk-live-4f9a0c2d7e1b"],
  ["a Slack webhook URL", "NOTIFY", "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"],
  ["a Discord webhook URL", "NOTIFY", "https://discord.com/api/webhooks/123456789012345678/abcdefghijklmnop"],
  ["a PEM private key", "SIGNING", PEM],
  ["a password", "DB_PW", "hunter2"],
  ["a connection string with Password=", "SQL", "Server=x;Password=y"],
  ["a token in a URL's user part", "ORIGIN", TOKEN_URL],
  [".npmrc text with _authToken", "NPMRC", NPMRC],
];

/** Names the old deny-list withheld: still withheld, now because no command needs them. */
const NAMED_LIKE_SECRETS = [
  "OPENAI_API_KEY",
  "AWS_SECRET_ACCESS_KEY",
  "GITHUB_TOKEN",
  "PGPASSWORD",
  "GOOGLE_APPLICATION_CREDENTIALS",
  "NPM_CONFIG__AUTH",
  "SSH_AUTH_SOCK",
  "GITHUB_PAT",
  "SENTRY_DSN",
  "MYSQL_PWD",
  "DATABASE_URL",
  "AZURE_STORAGE_CONNECTION_STRING",
  "SESSION_COOKIE",
];

/** What a command needs, group by group as COMMAND_ENVIRONMENT_NAMES gives the reasons: every one is kept. */
const NEEDED: readonly string[] = [
  ...["PATH", "HOME", "USER", "LOGNAME", "SHELL"],
  ...["LANG", "LANGUAGE", "LC_ALL", "LC_ADDRESS", "LC_COLLATE", "LC_CTYPE", "LC_IDENTIFICATION", "LC_MEASUREMENT"],
  ...["LC_MESSAGES", "LC_MONETARY", "LC_NAME", "LC_NUMERIC", "LC_PAPER", "LC_TELEPHONE", "LC_TIME", "TZ"],
  ...["TMPDIR", "TEMP", "TMP"],
  ...["TERM", "COLORTERM", "NO_COLOR", "COLUMNS", "LINES"],
  ...["XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "XDG_DATA_HOME", "XDG_DATA_DIRS", "XDG_CACHE_HOME", "XDG_STATE_HOME"],
  "XDG_RUNTIME_DIR",
  ...["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR"],
  ...["PSModulePath", "PSModuleAnalysisCachePath", "POWERSHELL_TELEMETRY_OPTOUT", "POWERSHELL_UPDATECHECK"],
  "POWERSHELL_DISTRIBUTION_CHANNEL",
  ...["DOTNET_ROOT", "DOTNET_ROOT(x86)", "DOTNET_ROOT_X86", "DOTNET_ROOT_X64", "DOTNET_ROOT_ARM64"],
  "DOTNET_SYSTEM_GLOBALIZATION_INVARIANT",
  ...["SystemRoot", "windir", "SystemDrive", "ComSpec", "PATHEXT", "OS"],
  ...["ProgramFiles", "ProgramFiles(x86)", "ProgramW6432", "CommonProgramFiles", "CommonProgramFiles(x86)"],
  ...["CommonProgramW6432", "ProgramData", "ALLUSERSPROFILE", "PUBLIC", "APPDATA", "LOCALAPPDATA", "USERPROFILE"],
  ...["USERNAME", "USERDOMAIN", "COMPUTERNAME", "HOMEDRIVE", "HOMEPATH", "NUMBER_OF_PROCESSORS"],
  ...["PROCESSOR_ARCHITECTURE", "PROCESSOR_ARCHITEW6432", "PROCESSOR_IDENTIFIER", "PROCESSOR_LEVEL"],
  "PROCESSOR_REVISION",
];

/** Variables that used to reach a command and need not: no name-based rule would have guessed them all. */
const NOT_NEEDED = ["PWD", "OLDPWD", "NODE_ENV", "NODE_OPTIONS", "JAVA_HOME", "OPENAI_BASE_URL", "npm_config_registry"];

// One line per pattern of CREDENTIAL_VALUE_PATTERNS, in its order: values that pattern catches.
const CAUGHT_BY_PATTERN: readonly (readonly string[])[] = [
  ["postgres://app:hunter2@db.internal:5432/app", "http://me:pw@proxy:8080", "https://x-access-token:abc@github.com"],
  [TOKEN_URL, "https://glpat-AbCdEf0123456789xyz@gitlab.com/o/r.git"],
  ["Bearer sk-live-4f9a0c2d7e1b", "Authorization: bearer abc.def", `Bearer ${JWT}`],
  [JWT, `token=${JWT}`],
  [
    PEM,
    "-----BEGIN PRIVATE KEY-----",
    "-----BEGIN EC PRIVATE KEY-----",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "-----BEGIN ENCRYPTED PRIVATE KEY-----",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----",
  ],
  [
    "Server=x;Password=y",
    "Password=y;Server=x",
    "Data Source=db;User ID=sa; Pwd=y",
    "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=YWJj==",
    "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=YWJj=",
  ],
  [NPMRC, "_auth=dXNlcjpwYXNz", "//npm.pkg.github.com/:_password=cGFzcw=="],
];
/** Ordinary values of the needed names, some close to a pattern: none of them looks like a credential. */
const ORDINARY_VALUES = [
  "/usr/local/bin:/usr/bin:/bin",
  "C:\\Program Files\\PowerShell\\7;C:\\Windows\\system32",
  "en_US.UTF-8",
  "xterm-256color",
  "http://proxy.internal:8080",
  "http://user@proxy:8080",
  "ssh://git@github.com/o/r.git",
  "https://example.com/a:b@c",
  "https://contoso@dev.azure.com/contoso/project",
  "localhost,127.0.0.1,.internal",
  "/etc/ssl/certs/ca-certificates.crt",
  "/home/me/.local/share/Bearer",
  "eyJhbGciOiJIUzI1NiJ9",
  "Server=x;Database=app;Integrated Security=true",
  "/home/me/my_auth",
  "",
];

describe("commandEnvironment", () => {
  it.each(ITEM_8)("withholds %s in %s", (_what, name, value) => {
    expect(commandEnvironment({ [name]: value, PATH: "/usr/bin" })).toStrictEqual({ PATH: "/usr/bin" });
  });

  it.each([...NAMED_LIKE_SECRETS, ...NOT_NEEDED])("withholds %s, which no command needs", (name) => {
    expect(commandEnvironment({ [name]: "s3cr3t", PATH: "/usr/bin" })).toStrictEqual({ PATH: "/usr/bin" });
  });

  it.each(NEEDED)("keeps %s with an ordinary value", (name) => {
    expect(commandEnvironment({ [name]: "/usr/bin" })).toStrictEqual({ [name]: "/usr/bin" });
  });

  it("lets through exactly the needed names, each once", () => {
    expect([...COMMAND_ENVIRONMENT_NAMES].sort()).toStrictEqual([...NEEDED].sort());
    const upper = COMMAND_ENVIRONMENT_NAMES.map((name) => name.toUpperCase());
    expect(new Set(upper).size).toBe(upper.length);
  });

  it.each<[string, string]>([
    ["HTTPS_PROXY", "http://me:pw@proxy:8080"],
    ["PATH", TOKEN_URL],
    ["LANG", "Bearer sk-live-4f9a0c2d7e1b"],
    ["TERM", JWT],
    ["TMPDIR", PEM],
    ["PSModulePath", "Server=x;Pwd=y"],
    ["HOME", NPMRC],
  ])("withholds the needed %s when its value is a credential", (name, value) => {
    expect(commandEnvironment({ [name]: value, USER: "me" })).toStrictEqual({ USER: "me" });
  });

  it("compares names without regard to ASCII case, as Windows does, and only ASCII case", () => {
    const env = { Path: "C:\\Windows", path: "/usr/bin", systemroot: "C:\\Windows", PsModulePath: "m", Tmp: "t" };
    expect(commandEnvironment(env)).toStrictEqual(env);
    // JavaScript upper-cases U+017F (ſ) to S and U+0131 (ı) to I; neither is a name Windows would match.
    expect(commandEnvironment({ ſHELL: "/bin/sh", PATı: "/usr/bin" })).toStrictEqual({});
  });

  it("skips a variable without a value", () => {
    expect(commandEnvironment({ PATH: undefined, HOME: "/home/me" })).toStrictEqual({ HOME: "/home/me" });
  });

  it("every value pattern is documented by its own values, and each catches one that no other pattern does", () => {
    expect(CAUGHT_BY_PATTERN).toHaveLength(CREDENTIAL_VALUE_PATTERNS.length);
    CREDENTIAL_VALUE_PATTERNS.forEach((pattern, index) => {
      const values = CAUGHT_BY_PATTERN[index] ?? [];
      expect(values.filter((value) => !pattern.test(value))).toStrictEqual([]);
      const onlyThis = values.filter((value) => CREDENTIAL_VALUE_PATTERNS.filter((p) => p.test(value)).length === 1);
      expect(onlyThis.length).toBeGreaterThan(0);
    });
    expect(CAUGHT_BY_PATTERN.flat().filter((value) => !looksLikeCredential(value))).toStrictEqual([]);
  });

  it("an ordinary value does not look like a credential", () => {
    expect(ORDINARY_VALUES.filter((value) => looksLikeCredential(value))).toStrictEqual([]);
  });

  it("stays linear on a long value that almost matches every pattern", () => {
    const started = performance.now();
    for (const piece of ["a", "eyJ", "a://", "a://b:", "-----BEGIN A", "Bearer", "_auth", ";Pwd"]) {
      expect(looksLikeCredential(piece.repeat(Math.ceil(131_072 / piece.length)))).toBe(false);
    }
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});

describe.skipIf(powershell === undefined)("the command environment over real PowerShell", () => {
  it("a command's $env: listing has none of the planted credentials, and the command still runs a program", async () => {
    const planted: Record<string, string> = {
      ...Object.fromEntries(ITEM_8.map(([, name, value], index) => [`${name}_${index}`, value])),
      AGENT_TUTORIAL_TEST_API_KEY: "sk-must-not-leak",
      HTTPS_PROXY: "http://me:pw-must-not-leak@proxy.invalid:8080",
      LC_PAPER: `Bearer ${JWT}`,
    };
    const before = Object.fromEntries(Object.keys(planted).map((name) => [name, process.env[name]]));
    Object.assign(process.env, planted);
    try {
      const result = await new PowerShellRunner().run(
        "Get-ChildItem env: | ForEach-Object { \"$($_.Name)=$($_.Value)\" }; node -e 'console.log(6 * 7)'",
        workspace,
      );
      expect(result).toMatchObject({ exitCode: 0, timedOut: false, truncated: false });
      const lines = result.output.split(/\r?\n/);
      expect(lines.at(-1)).toBe("42");
      expect(lines.some((line) => /^PATH=/i.test(line))).toBe(true);
      const listed = new Set(lines.map((line) => line.split("=")[0]?.toUpperCase()));
      expect(Object.keys(planted).filter((name) => listed.has(name.toUpperCase()))).toStrictEqual([]);
      for (const value of Object.values(planted)) {
        for (const part of value.split("\n").filter((line) => line.length > 8))
          expect(result.output).not.toContain(part);
      }
    } finally {
      for (const [name, value] of Object.entries(before)) {
        if (value === undefined) Reflect.deleteProperty(process.env, name);
        else process.env[name] = value;
      }
    }
  });
});

describe("PowerShellRunner without an executable", () => {
  it("rejects when no process can start, which the shell tool reports as shell_start_failed", async () => {
    const missing = join(tmpdir(), "no-such-pwsh-here");
    const runner = new PowerShellRunner({ executable: missing });
    await expect(runner.run("x", workspace)).rejects.toThrow(
      new Error(`PowerShell could not be started: spawn ${missing} ENOENT`),
    );
    expect(await shell(runner, "x")).toStrictEqual({
      content: "Error [shell_start_failed]: PowerShell process could not be started",
      isError: true,
      errorCode: "shell_start_failed",
    });
  });
});

describe("OutputBuffer", () => {
  it("keeps everything while under the cap", () => {
    const buffer = new OutputBuffer(10);
    buffer.push(Buffer.from("abc"));
    buffer.push(Buffer.from("defghij"));
    expect(buffer.truncated).toBe(false);
    expect(buffer.text()).toBe("abcdefghij");
  });

  it("decodes stdout and stderr apart: a character split in one pipe survives a chunk of the other in between", () => {
    const buffer = new OutputBuffer(100);
    const ni = Buffer.from("你", "utf8");
    buffer.push(ni.subarray(0, 1), "stdout");
    buffer.push(Buffer.from("err\n"), "stderr");
    buffer.push(ni.subarray(1), "stdout");
    expect(buffer.text()).toBe("err\n你");
  });

  it("keeps the first maxChars characters and drops the rest", () => {
    const buffer = new OutputBuffer(10);
    for (const piece of ["abcdefgh", "ijklmnop", "qrstuvwxyz"]) buffer.push(Buffer.from(piece));
    expect(buffer.truncated).toBe(true);
    expect(buffer.text()).toBe("abcdefghij");
  });

  it("counts characters: a character split across chunks is joined, not cut", () => {
    const bytes = Buffer.from("中文字", "utf8");
    const buffer = new OutputBuffer(2);
    buffer.push(bytes.subarray(0, 4));
    buffer.push(bytes.subarray(4));
    expect(buffer.text()).toBe("中文");
    expect(buffer.truncated).toBe(true);
  });

  it("never cuts a surrogate pair in half", () => {
    const buffer = new OutputBuffer(3);
    buffer.push(Buffer.from("ab😀", "utf8"));
    expect(buffer.text()).toBe("ab");
    expect(buffer.truncated).toBe(true);
  });

  it("holds no more than its cap however much is pushed", () => {
    const buffer = new OutputBuffer(1024);
    const chunk = Buffer.alloc(64 * 1024, "z");
    for (let i = 0; i < 2_000; i += 1) buffer.push(chunk); // 128 MB through a 1 KB buffer
    expect(buffer.text()).toBe("z".repeat(1024));
    expect(buffer.truncated).toBe(true);
  });
});
