import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
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
  it("needs no key, walks the book's write → edit → read → glob, and refuses ../secret.txt as path_escape", () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_")));
    const transcriptFolder = mkdtempSync(join(tmpdir(), "ch02-demo-transcript-"));
    demoRoots.push(transcriptFolder);
    const transcript = join(transcriptFolder, "demo.json");
    const run = spawnSync(process.execPath, ["--import", tsx, entry, "--demo", "--transcript", transcript], {
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
        '→ write_file {"path":"demo/note.txt","content":"alpha"}',
        "  ✓ ok",
        '→ edit_file {"path":"demo/note.txt","old_text":"alpha","new_text":"gamma"}',
        "  ✓ ok",
        '→ read_file {"path":"demo/note.txt"}',
        "  ✓ ok",
        '→ glob {"pattern":"demo/*.txt"}',
        "  ✓ ok",
        '→ read_file {"path":"../secret.txt"}',
        "  ✗ path_escape",
        "",
      ].join("\n"),
    );
    expect(finalText.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${finalText}\n`);
    // What the model was told, call by call: the book's four results, then the refusal.
    const recorded = JSON.parse(readFileSync(transcript, "utf8")) as {
      messages: { role: string; tool_call_id?: string; content: string | null }[];
    };
    expect(recorded.messages.filter((message) => message.role === "tool")).toEqual([
      { role: "tool", tool_call_id: "call_demo_1", content: "Wrote 5 UTF-8 bytes to demo/note.txt" },
      { role: "tool", tool_call_id: "call_demo_2", content: "Edited demo/note.txt" },
      { role: "tool", tool_call_id: "call_demo_3", content: "gamma" },
      { role: "tool", tool_call_id: "call_demo_4", content: "demo/note.txt" },
      {
        role: "tool",
        tool_call_id: "call_demo_5",
        content: "Error [path_escape]: Path escapes workspace: ../secret.txt",
      },
    ]);
    // The file is on disk, exactly; nothing was written next to the workspace.
    expect(readdirSync(workspace).sort()).toEqual(["README.md", "demo"]);
    expect(readdirSync(join(workspace, "demo"))).toEqual(["note.txt"]);
    expect(readFileSync(join(workspace, "demo", "note.txt"), "utf8")).toBe("gamma");
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });
});
