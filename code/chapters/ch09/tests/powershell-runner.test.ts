import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { OUTPUT_CAP_CHARS, PowerShellRunner } from "../src/adapters/powershell.js";
import { powershell } from "./support/powershell.js";
import { eventually, isAlive, killQuietly, readPid } from "./support/processes.js";

// The runner over real PowerShell, on its own: what it returns is checked exactly here, and what the shell tool
// makes of exactly those results in shell-tool.test.ts. Only the runner is imported, so a chapter that changes
// the tools, the loop or the messages does not have to start these PowerShell processes again.
let workspace: string;
beforeAll(async () => {
  workspace = await realpath(await mkdtemp(join(tmpdir(), "ch01-pwsh-")));
});
afterAll(async () => {
  await rm(workspace, { recursive: true, force: true });
});

describe.skipIf(powershell === undefined)("PowerShellRunner over real PowerShell", () => {
  const runner = new PowerShellRunner();

  it("starts in the workspace and returns the output with exit code 0", async () => {
    expect(await runner.run("Write-Output hello; (Get-Location).Path", workspace)).toStrictEqual({
      output: `hello\n${workspace}`,
      exitCode: 0,
      timedOut: false,
      truncated: false,
    });
  });

  it("renders formatted output as plain text: no ANSI colour codes reach the model, whatever the host", async () => {
    const result = await runner.run(
      "$PSStyle.OutputRendering; New-Item -ItemType File -Path colour.txt | Out-Null; Get-ChildItem; Write-Error 'boom'",
      workspace,
    );
    expect(result.output.split("\n")[0]).toBe("PlainText");
    expect(result.output).toContain("colour.txt");
    expect(result.output).not.toContain("\u001b");
  });

  it("an error reaches the model as the text PowerShell prints, not as CLIXML with escaped colour codes", async () => {
    const result = await runner.run("Get-Content missing.txt", workspace);
    expect(result.exitCode).toBe(1);
    expect(result.output).not.toContain("CLIXML");
    expect(result.output).not.toContain("_x001B_");
    expect(result.output).not.toContain("\u001b");
    expect(result.output).toMatch(/^Get-Content: /);
    expect(result.output).toContain("because it does not exist.");
  });

  it("reads and writes UTF-8: non-ASCII text, quotes, dollars and backticks pass through untouched", async () => {
    const result = await runner.run("$v = '中文 é ✓ 😀 \"b\" $c `d ; rm -rf /'\nWrite-Output $v", workspace);
    expect(result.output).toBe('中文 é ✓ 😀 "b" $c `d ; rm -rf /');
  });

  it("merges stderr with stdout in the order it was written", async () => {
    const result = await runner.run(
      "Write-Output one; Start-Sleep -Milliseconds 300; [Console]::Error.WriteLine('two'); " +
        "Start-Sleep -Milliseconds 300; Write-Output three",
      workspace,
    );
    expect(result.output).toBe("one\ntwo\nthree");
  });

  it("hands the command PATH, but not the agent's credentials nor a variable it does not need", async () => {
    process.env.AGENT_TUTORIAL_TEST_API_KEY = "sk-must-not-leak";
    process.env.AGENT_TUTORIAL_TEST_PLAIN = "not-needed";
    try {
      const result = await runner.run(
        'Write-Output "[$env:AGENT_TUTORIAL_TEST_API_KEY][$env:AGENT_TUTORIAL_TEST_PLAIN][$($env:PATH -eq $null)]"',
        workspace,
      );
      expect(result.output).toBe("[][][False]");
    } finally {
      delete process.env.AGENT_TUTORIAL_TEST_API_KEY;
      delete process.env.AGENT_TUTORIAL_TEST_PLAIN;
    }
  });

  it("does not hand the command credentials named the common ways either", async () => {
    const names = ["MYSQL_PWD", "GITHUB_PAT", "DATABASE_URL", "SENTRY_DSN", "NPM_CONFIG__AUTH"];
    for (const name of names) process.env[`AGENT_TUTORIAL_TEST_${name}`] = "must-not-leak";
    try {
      const script = names.map((name) => `"[$env:AGENT_TUTORIAL_TEST_${name}]"`).join(" + ");
      expect((await runner.run(`Write-Output (${script})`, workspace)).output).toBe("[][][][][]");
    } finally {
      for (const name of names) Reflect.deleteProperty(process.env, `AGENT_TUTORIAL_TEST_${name}`);
    }
  });

  it("a non-zero exit code comes back with the output (the tool reports it as shell_failed)", async () => {
    expect(await runner.run("Write-Output partial; exit 3", workspace)).toStrictEqual({
      output: "partial",
      exitCode: 3,
      timedOut: false,
      truncated: false,
    });
    expect(await runner.run("Write-Output x; exit 4", workspace)).toStrictEqual({
      output: "x",
      exitCode: 4,
      timedOut: false,
      truncated: false,
    });
  });

  it("a command with no output, or only empty lines, comes back with empty output (the tool says (no output))", async () => {
    const empty = { output: "", exitCode: 0, timedOut: false, truncated: false };
    expect(await runner.run("$null", workspace)).toStrictEqual(empty);
    expect(await runner.run("Write-Output ''; Write-Output ''", workspace)).toStrictEqual(empty);
  });

  it("drops only the final line breaks: empty lines inside the output stay", async () => {
    const result = await runner.run("Write-Output a; Write-Output ''; Write-Output b; Write-Output ''", workspace);
    expect(result.output).toBe("a\n\nb");
  });

  it("on timeout kills the whole process tree, grandchildren included, and says timedOut (the tool's shell_timeout)", async () => {
    // pwsh starts sh, which starts a background sleep and prints its pid: a grandchild of pwsh.
    // Generous: pwsh alone can take seconds to start on a loaded machine.
    const slow = new PowerShellRunner({ timeoutMs: 12_000 });
    const result = await slow.run("sh -c 'sleep 300 & echo $!; wait'", workspace);
    const pid = Number(result.output.trim().split("\n")[0]);
    expect(result).toStrictEqual({ output: `${pid}`, exitCode: null, timedOut: true, truncated: false });
    expect(pid).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(isAlive(pid)).toBe(false);
  });

  it("keeps the first 50,000 characters of a flood and says it truncated them (the tool's [output truncated])", async () => {
    expect(OUTPUT_CAP_CHARS).toBe(50_000);
    const flood = "Write-Output 'HEAD'; [Console]::Out.Write('x' * 2MB); Write-Output 'TAIL'";
    const result = await runner.run(flood, workspace);
    expect(result).toStrictEqual({
      output: `HEAD\n${"x".repeat(50_000 - 5)}`,
      exitCode: 0,
      timedOut: false,
      truncated: true,
    });
  });

  it("counts the cap in characters, not bytes", async () => {
    const result = await runner.run("[Console]::Out.Write('中' * 60000)", workspace);
    expect(result.output).toBe("中".repeat(50_000));
    expect(result.truncated).toBe(true);
  });

  it("output of exactly 50,000 characters is not truncated", async () => {
    const result = await runner.run("[Console]::Out.Write('y' * 50000)", workspace);
    expect(result).toStrictEqual({ output: "y".repeat(50_000), exitCode: 0, timedOut: false, truncated: false });
  });
});

describe.skipIf(powershell === undefined || process.platform === "win32")(
  "a finished command takes its background children along",
  () => {
    /** Every sleeper a test learned, killed with its group afterwards, so a failing test leaves none behind. */
    const sleepers: number[] = [];
    afterEach(() => {
      sleepers.splice(0).forEach(killQuietly);
    });

    it.each([
      [
        "Start-Process",
        "$p = Start-Process -FilePath sleep -ArgumentList 300 -PassThru; Set-Content -Path sleeper.tmp -Value $p.Id; " +
          "Move-Item sleeper.tmp sleeper.pid; 'started'",
      ],
      [
        "a & job",
        "$job = sh -c 'echo $$ > sleeper.tmp; mv sleeper.tmp sleeper.pid; exec sleep 300' &; " +
          "while (-not (Test-Path sleeper.pid)) { Start-Sleep -Milliseconds 100 }; 'started'",
      ],
      [
        "nohup",
        "sh -c 'nohup sleep 300 >/dev/null 2>&1 & echo $! > sleeper.tmp; mv sleeper.tmp sleeper.pid'; 'started'",
      ],
    ])(
      "a sleeper started with %s is gone once the command has returned",
      async (_how, command) => {
        // A folder of its own, so one case never reads the pid file another case wrote.
        const folder = await mkdtemp(join(workspace, "children-"));
        const result = await new PowerShellRunner().run(command, folder);
        expect(result).toStrictEqual({ output: "started", exitCode: 0, timedOut: false, truncated: false });
        const pidPath = join(folder, "sleeper.pid");
        await eventually(() => readPid(pidPath) !== undefined, "sleeper.pid to be written");
        const sleeper = readPid(pidPath) as number;
        sleepers.push(sleeper);
        await eventually(() => !isAlive(sleeper), `sleeper ${sleeper} to be gone`);
      },
      90_000,
    );
  },
);
