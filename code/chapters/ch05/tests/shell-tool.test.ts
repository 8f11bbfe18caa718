import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { OutputBuffer } from "../src/adapters/output-buffer.js";
import {
  commandEnvironment,
  isSecretVariable,
  PowerShellRunner,
  SECRET_NAME_PATTERNS,
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

// One line per pattern of SECRET_NAME_PATTERNS, in its order: names that pattern withholds.
const WITHHELD_BY_PATTERN: readonly (readonly string[])[] = [
  [
    "OPENAI_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
    "AWS_SESSION_TOKEN",
    "PGPASSWORD",
    "PASSWD",
    "GPG_PASSPHRASE",
  ],
  ["GOOGLE_APPLICATION_CREDENTIALS", "AWS_SHARED_CREDENTIALS_FILE", "AZURE_CREDENTIAL"],
  ["NPM_CONFIG__AUTH", "npm_config__auth", "HTTP_AUTHORIZATION", "OAUTH_CLIENT", "SSH_AUTH_SOCK", "BASIC_AUTH"],
  ["SMTP_PASS", "PASS", "PASS_FILE", "GITHUB_PAT", "GH_PAT", "AZURE_DEVOPS_EXT_PAT", "SENTRY_DSN", "DATABASE_DSN"],
  ["MYSQL_PWD", "DB_PWD"],
  ["DATABASE_URL", "DB_URL", "REDIS_URL", "REDIS_TLS_URL", "MONGODB_URI", "POSTGRES_URL", "MYSQL_URL", "CLOUDAMQP_URL"],
  ["AZURE_STORAGE_CONNECTION_STRING", "ConnectionString", "SQL_CONNSTR"],
  ["SESSION_COOKIE", "COOKIE", "PHPSESSID", "SESSION", "SESSION_ID", "APP_SESSIONID"],
];
/** Ordinary variables a command needs, some of them close to a pattern: every one stays. */
const KEPT = [
  "PATH",
  "Path",
  "PATHEXT",
  "HOME",
  "USERPROFILE",
  "PWD",
  "OLDPWD",
  "USER",
  "LANG",
  "TERM",
  "SHELL",
  "TMPDIR",
  "NODE_ENV",
  "INIT_CWD",
  "JAVA_HOME",
  "COMPASS_HOME",
  "GIT_AUTHOR_NAME",
  "GIT_AUTHOR_EMAIL",
  "XDG_SESSION_TYPE",
  "DBUS_SESSION_BUS_ADDRESS",
  "OPENAI_BASE_URL",
  "HTTP_PROXY",
  "npm_config_registry",
];

describe("commandEnvironment", () => {
  it.each(WITHHELD_BY_PATTERN.flat())("withholds %s", (name) => {
    expect(commandEnvironment({ [name]: "s3cr3t", PATH: "/usr/bin" })).toStrictEqual({ PATH: "/usr/bin" });
  });

  it.each(KEPT)("keeps %s", (name) => {
    expect(commandEnvironment({ [name]: "/usr/bin" })).toStrictEqual({ [name]: "/usr/bin" });
  });

  it("every pattern is documented by its own names, and each withholds one that no other pattern does", () => {
    expect(WITHHELD_BY_PATTERN).toHaveLength(SECRET_NAME_PATTERNS.length);
    SECRET_NAME_PATTERNS.forEach((pattern, index) => {
      const names = WITHHELD_BY_PATTERN[index] ?? [];
      expect(names.filter((name) => !pattern.test(name))).toEqual([]);
      const onlyThis = names.filter((name) => SECRET_NAME_PATTERNS.filter((other) => other.test(name)).length === 1);
      expect(onlyThis.length).toBeGreaterThan(0);
    });
  });

  it("withholds a variable of any name whose value is a URL with a password in it", () => {
    const env = {
      UPSTREAM: "postgres://app:hunter2@db.internal:5432/app",
      PROXY_FOR_TESTS: "http://me:pw@proxy:8080",
      SITE: "https://example.com/a:b@c",
      REPO: "ssh://git@github.com/o/r.git",
      PLAIN_PROXY: "http://user@proxy:8080",
    };
    expect(commandEnvironment(env)).toStrictEqual({
      SITE: "https://example.com/a:b@c",
      REPO: "ssh://git@github.com/o/r.git",
      PLAIN_PROXY: "http://user@proxy:8080",
    });
    expect(isSecretVariable("X", undefined)).toBe(false);
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
