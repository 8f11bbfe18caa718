import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const entry = fileURLToPath(new URL("../src/chapters/ch02.ts", import.meta.url));
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

describe("the chapter 2 demo without a terminal", () => {
  it("needs no key, globs, reads and writes inside, refuses the outside write as path_escape and the shell for want of a TTY", () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_")));
    const run = spawnSync(process.execPath, ["--import", tsx, entry, "--demo"], {
      env,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 60_000,
    });
    const workspace = /演示工作区: (\S+)/.exec(run.stderr)?.[1] ?? "";
    // Only a folder the demo named is removed: never "." when the line is missing.
    if (workspace !== "") demoRoots.push(dirname(workspace));
    expect(workspace).toMatch(/agent-tutorial-demo-[^/]+\/workspace$/);
    expect(run.status).toBe(0);
    expect(run.stderr).toBe(
      [
        `演示工作区: ${workspace}`,
        '→ glob {"pattern":"**/*.md"}',
        "  ✓ ok",
        '→ read_file {"path":"README.md"}',
        "  ✓ ok",
        '→ write_file {"path":"notes/summary.txt","content":"这是 agent-tutorial 的演示工作区。\\n"}',
        "  ✓ ok",
        '→ write_file {"path":"../outside.txt","content":"不应该出现\\n"}',
        "  ✗ path_escape",
        '→ shell {"command":"Get-ChildItem -Force -Recurse"}',
        "无交互输入，默认拒绝。",
        "  ✗ denied",
        "",
      ].join("\n"),
    );
    expect(finalText.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${finalText}\n`);
    // The inside write is on disk, exactly; nothing was written next to the workspace.
    expect(readdirSync(workspace).sort()).toEqual(["README.md", "notes"]);
    expect(readdirSync(join(workspace, "notes"))).toEqual(["summary.txt"]);
    expect(readFileSync(join(workspace, "notes", "summary.txt"), "utf8")).toBe("这是 agent-tutorial 的演示工作区。\n");
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });
});
