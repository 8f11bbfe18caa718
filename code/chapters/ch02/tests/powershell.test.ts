import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PowerShellRunner } from "../src/adapters/powershell.js";
import { CommandStartError } from "../src/core/command-runner.js";
import { runShellCommand } from "../src/features/shell.js";
import { powershell } from "./support/powershell.js";

let workspace: string;
beforeAll(async () => {
  workspace = await realpath(await mkdtemp(join(tmpdir(), "ch01-pwsh-")));
});
afterAll(async () => {
  await rm(workspace, { recursive: true, force: true });
});

/** Alive means running: a killed process that nobody has reaped yet (a zombie, state Z) is dead. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return true;
  }
}

describe.skipIf(powershell === undefined)("PowerShellRunner against real pwsh", () => {
  const runner = new PowerShellRunner();
  const run = (command: string, timeoutMs?: number) =>
    runner.run({ command, cwd: workspace, ...(timeoutMs ? { timeoutMs } : {}) });

  it("returns the output and exit code 0, starting in the workspace", async () => {
    const result = await run("Write-Output hello; (Get-Location).Path");
    expect(result).toEqual({ output: `hello\n${workspace}\n`, exitCode: 0, timedOut: false, truncated: false });
  });

  it("passes quotes, dollars, backticks, newlines and non-ASCII text through untouched", async () => {
    const result = await run("$v = 'a \"b\" $c `d 中文 ; rm -rf /'\nWrite-Output $v");
    expect(result.output).toBe('a "b" $c `d 中文 ; rm -rf /\n');
  });

  it("merges stderr with stdout in the order it was written", async () => {
    const result = await run(
      "Write-Output one; Start-Sleep -Milliseconds 300; [Console]::Error.WriteLine('two'); " +
        "Start-Sleep -Milliseconds 300; Write-Output three",
    );
    expect(result.output).toBe("one\ntwo\nthree\n");
  });

  it("does not hand the command the agent's credentials", async () => {
    process.env.AGENT_TUTORIAL_TEST_API_KEY = "sk-must-not-leak";
    process.env.AGENT_TUTORIAL_TEST_PLAIN = "visible";
    try {
      const result = await run('Write-Output "[$env:AGENT_TUTORIAL_TEST_API_KEY][$env:AGENT_TUTORIAL_TEST_PLAIN]"');
      expect(result.output).toBe("[][visible]\n");
    } finally {
      delete process.env.AGENT_TUTORIAL_TEST_API_KEY;
      delete process.env.AGENT_TUTORIAL_TEST_PLAIN;
    }
  });

  it("reports a non-zero exit code", async () => {
    const result = await run("Write-Output partial; exit 3");
    expect(result).toEqual({ output: "partial\n", exitCode: 3, timedOut: false, truncated: false });
  });

  it("the shell tool turns results into the exact tool messages", async () => {
    expect(await runShellCommand(runner, "$null", workspace)).toEqual({ content: "(no output)", isError: false });
    expect(await runShellCommand(runner, "Write-Output x; exit 4", workspace)).toEqual({
      content: "Error [shell_failed]: PowerShell exited with code 4\nx\n",
      isError: true,
      errorCode: "shell_failed",
    });
  });

  it("on timeout kills the whole process tree, grandchildren included", async () => {
    // pwsh starts sh, which starts a background sleep and prints its pid: a grandchild of pwsh.
    // Generous: pwsh alone can take seconds to start on a loaded machine.
    const result = await run("sh -c 'sleep 300 & echo $!; wait'", 8_000);
    const pid = Number(result.output.trim().split("\n")[0]);
    expect(result.timedOut).toBe(true);
    expect(result.exitCode).toBeNull();
    expect(pid).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(isAlive(pid)).toBe(false);
  });

  it("caps output at 50 KB, keeping head and tail, and says it was truncated", async () => {
    const result = await run(
      "Write-Output 'HEAD'; [Console]::Out.Write('x' * 2MB); Write-Output ''; Write-Output 'TAIL'",
    );
    expect(result.truncated).toBe(true);
    expect(result.exitCode).toBe(0);
    expect(Buffer.byteLength(result.output)).toBeLessThan(50 * 1024 + 100);
    expect(result.output.startsWith("HEAD\nxxx")).toBe(true);
    expect(result.output.endsWith("xxx\nTAIL\n")).toBe(true);
    expect(result.output).toMatch(/\n\[\.\.\. \d+ bytes omitted \.\.\.\]\n/);
  });

  it("saves long output in full under .agent/shell-output and tells the model where", async () => {
    const tool = await runShellCommand(runner, "[Console]::Out.Write('y' * 100KB)", workspace);
    const note =
      /\n\[output truncated\]\n\[full output \(102400 bytes\) saved to (\.agent\/shell-output\/shell-\d+-[a-z0-9]+\.log); read it in pages with read_file\]$/;
    const match = note.exec(tool.content);
    expect(tool.isError).toBe(false);
    expect(match).not.toBeNull();
    expect(tool.content.slice(0, 100)).toBe("y".repeat(100));
    expect(readFileSync(join(workspace, match?.[1] ?? "missing"), "utf8")).toBe("y".repeat(100 * 1024));
  });

  it("saves nothing when the output fits", async () => {
    await runShellCommand(runner, "Write-Output small", workspace);
    const saved = join(workspace, ".agent", "shell-output");
    const before = existsSync(saved) ? readdirSync(saved).length : 0;
    await runShellCommand(runner, "Write-Output small", workspace);
    expect(existsSync(saved) ? readdirSync(saved).length : 0).toBe(before);
  });
});

describe("PowerShellRunner without an executable", () => {
  it("rejects with CommandStartError, which the shell tool reports as shell_start_failed", async () => {
    const missing = new PowerShellRunner({ executable: join(tmpdir(), "no-such-pwsh-here") });
    await expect(missing.run({ command: "x", cwd: tmpdir() })).rejects.toBeInstanceOf(CommandStartError);
    expect(await runShellCommand(missing, "x", tmpdir())).toEqual({
      content: "Error [shell_start_failed]: PowerShell process could not be started",
      isError: true,
      errorCode: "shell_start_failed",
    });
  });
});
