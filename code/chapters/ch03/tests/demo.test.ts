import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { powershell } from "./support/powershell.js";

const entry = fileURLToPath(new URL("../src/chapters/ch03.ts", import.meta.url));
const walkthrough = JSON.parse(readFileSync(new URL("../demo/walkthrough.json", import.meta.url), "utf8")) as {
  messages: { role: string; content: string | null }[];
};
/** The walkthrough's last assistant turn: the demo's final answer. */
const finalText = walkthrough.messages.at(-1)?.content ?? "";
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const demoRoots: string[] = [];

afterEach(async () => {
  await Promise.all(demoRoots.splice(0).map((root) => rm(root, { recursive: true, force: true })));
});

/** The environment of a reader with no key at all. */
function keyless(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_")));
}

/** The temp workspace the demo announced on its first line; its parent is removed after the test. */
function announcedWorkspace(output: string): string {
  const workspace = /演示工作区: (\S+)/.exec(output)?.[1];
  // Only a folder the demo named is removed: never "." when the line is missing.
  if (workspace === undefined) throw new Error(`the demo did not say where its workspace is:\n${output}`);
  demoRoots.push(dirname(workspace));
  return workspace;
}

const NO_TTY = "无交互输入，默认拒绝。";
const GLOB_ALLOWED = "[Permission] glob: allow (default) - No permission rule blocked the request";
const SHELL_NO_TTY = "[Permission] shell: deny (terminal-approval) - No interactive approval input was available";
const WRITE_NO_TTY = "[Permission] write_file: deny (terminal-approval) - No interactive approval input was available";
const HARD_DENY = "[Permission] write_file: deny (workspace-boundary) - Writing outside the workspace is forbidden";

function demo(args: readonly string[]) {
  return spawnSync(process.execPath, ["--import", tsx, entry, "--demo", ...args], {
    env: keyless(),
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 60_000,
  });
}

describe("the chapter 3 demo without a terminal", () => {
  it("needs no key, audits every decision: glob allowed, the shell and the inside write denied for want of a TTY, the outside write hard-denied", () => {
    const run = demo([]);
    const workspace = announcedWorkspace(run.stderr);
    expect(workspace).toMatch(/agent-tutorial-demo-[^/]+\/workspace$/);
    expect(run.status).toBe(0);
    expect(run.stderr).toBe(
      [
        `演示工作区: ${workspace}`,
        '→ glob {"pattern":"**/*.md"}',
        GLOB_ALLOWED,
        "  ✓ ok",
        '→ shell {"command":"Get-ChildItem -Force"}',
        NO_TTY,
        SHELL_NO_TTY,
        "  ✗ denied",
        '→ write_file {"path":"chapter3-note.txt","content":"演示工作区里有一个 README.md。\\n"}',
        NO_TTY,
        WRITE_NO_TTY,
        "  ✗ denied",
        '→ write_file {"path":"../outside.txt","content":"不应该出现\\n"}',
        HARD_DENY,
        "  ✗ denied",
        "",
      ].join("\n"),
    );
    expect(finalText.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${finalText}\n`);
    // Nothing was written: not inside (the write was refused), not beside the workspace (the hard deny).
    expect(readdirSync(workspace)).toEqual(["README.md"]);
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });

  it("tells the model, call by call, what the policy decided: the glob's result, two refusals and the hard deny", () => {
    const transcriptFolder = mkdtempSync(join(tmpdir(), "ch03-demo-transcript-"));
    demoRoots.push(transcriptFolder);
    const transcript = join(transcriptFolder, "demo.json");
    const run = demo(["--transcript", transcript]);
    announcedWorkspace(run.stderr);
    expect(run.status).toBe(0);
    const recorded = JSON.parse(readFileSync(transcript, "utf8")) as {
      messages: { role: string; tool_call_id?: string; content: string | null }[];
    };
    const refused = "Error [permission_denied]: No interactive approval input was available";
    expect(recorded.messages.filter((message) => message.role === "tool")).toEqual([
      { role: "tool", tool_call_id: "call_demo_1", content: "README.md" },
      { role: "tool", tool_call_id: "call_demo_2", content: refused },
      { role: "tool", tool_call_id: "call_demo_3", content: refused },
      {
        role: "tool",
        tool_call_id: "call_demo_4",
        content: "Error [permission_denied]: Writing outside the workspace is forbidden",
      },
    ]);
  });

  it("with --quiet prints only the answer on stdout and no progress lines, but keeps the audit", () => {
    const run = demo(["--quiet"]);
    const workspace = announcedWorkspace(run.stderr);
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(run.stderr).toBe(
      [`演示工作区: ${workspace}`, GLOB_ALLOWED, NO_TTY, SHELL_NO_TTY, NO_TTY, WRITE_NO_TTY, HARD_DENY, ""].join("\n"),
    );
  });
});

const hasScript = spawnSync("script", ["--version"], { encoding: "utf8" }).status === 0;
const ptyOk = hasScript && powershell !== undefined && process.platform === "linux";

/**
 * Runs the demo under a real pseudo-terminal (util-linux `script`) and types each answer when
 * the question appears, as a reader would.
 */
function demoUnderTerminal(answers: readonly string[]): Promise<{ code: number | null; output: string }> {
  const command = [process.execPath, "--import", tsx, entry, "--demo"].map((part) => `'${part}'`).join(" ");
  return new Promise((resolve, reject) => {
    const child = spawn("script", ["-qec", command, "/dev/null"], { env: keyless(), stdio: ["pipe", "pipe", "pipe"] });
    let output = "";
    let asked = 0;
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
      const questions = output.split("允许本次调用? [y/N]").length - 1;
      while (asked < questions) {
        child.stdin.write(`${answers[asked] ?? "n"}\n`);
        asked += 1;
      }
    });
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe.skipIf(!ptyOk)("the chapter 3 demo on a terminal", () => {
  it("answering y to the shell and y to the write runs both, each exactly once, and still hard-denies outside", async () => {
    const { code, output } = await demoUnderTerminal(["y", "y"]);
    expect(code).toBe(0);
    const workspace = announcedWorkspace(output);
    expect(output.split("允许本次调用? [y/N]").length - 1).toBe(2);
    expect(output.match(/\[Permission\] shell: allow \(user\) - Approved by the user/g)).toHaveLength(1);
    expect(output.match(/\[Permission\] write_file: allow \(user\) - Approved by the user/g)).toHaveLength(1);
    expect(output).toContain(HARD_DENY);
    expect(output).not.toContain(NO_TTY);
    expect(readFileSync(join(workspace, "chapter3-note.txt"), "utf8")).toBe("演示工作区里有一个 README.md。\n");
    expect(readdirSync(workspace).sort()).toEqual(["README.md", "chapter3-note.txt"]);
    expect(existsSync(join(dirname(workspace), "outside.txt"))).toBe(false);
  });

  it("answering y then n runs the shell call and refuses the write", async () => {
    const { code, output } = await demoUnderTerminal(["y", "n"]);
    expect(code).toBe(0);
    const workspace = announcedWorkspace(output);
    expect(output.split("允许本次调用? [y/N]").length - 1).toBe(2);
    expect(output).toContain("[Permission] shell: allow (user) - Approved by the user");
    expect(output).toContain("[Permission] write_file: deny (user) - Denied by the user");
    expect(output).toContain(HARD_DENY);
    expect(readdirSync(workspace)).toEqual(["README.md"]);
    expect(existsSync(join(dirname(workspace), "outside.txt"))).toBe(false);
  });
});
