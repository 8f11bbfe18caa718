import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { prepareDemo } from "../src/cli/demo.js";

const entry = fileURLToPath(new URL("../src/chapters/ch02.ts", import.meta.url));
const chapterOneEntry = fileURLToPath(new URL("../src/chapters/ch01.ts", import.meta.url));
/** Chapter 2's own walkthrough: what `npm run ch02 -- --demo` replays (prepareDemo(2) reads demo/ch02.json). */
const walkthrough = JSON.parse(readFileSync(new URL("../demo/ch02.json", import.meta.url), "utf8")) as {
  messages: { role: string; content: string | null }[];
};
/** The walkthrough's last assistant turn: the demo's final answer. */
const finalText = walkthrough.messages.at(-1)?.content ?? "";
/** Chapter 1's walkthrough, which this snapshot carries too, for `npm run ch01 -- --demo` on it. */
const chapterOneWalkthrough = JSON.parse(readFileSync(new URL("../demo/ch01.json", import.meta.url), "utf8")) as {
  messages: { role: string; content: string | null }[];
};
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

describe("prepareDemo(chapter) in this snapshot", () => {
  it.each<[number, string]>([
    [1, "ch01.json"],
    [2, "ch02.json"],
  ])("prepareDemo(%i) replays its own demo/%s in a fresh workspace holding only README.md", async (chapter, name) => {
    const file = JSON.parse(readFileSync(new URL(`../demo/${name}`, import.meta.url), "utf8")) as {
      chapter: number;
      messages: { role: string; content: string | null }[];
    };
    const setup = await prepareDemo(chapter);
    demoRoots.push(dirname(setup.workspace));
    expect(file.chapter).toBe(chapter);
    expect(setup.transcript.chapter).toBe(chapter);
    expect(setup.prompt).toBe(file.messages.find((message) => message.role === "user")?.content);
    expect(setup.transcript.messages.map((message) => [message.role, message.content])).toEqual(
      file.messages.map((message) => [message.role, message.content]),
    );
    expect(readdirSync(setup.workspace)).toEqual(["README.md"]);
  });
});

describe("the chapter 1 demo on this snapshot", () => {
  it("replays chapter 1's own walkthrough: two shell calls, each refused without a TTY, no file tool and no unknown_tool", () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_")));
    const run = spawnSync(process.execPath, ["--import", tsx, chapterOneEntry, "--demo"], {
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
        '→ shell {"command":"Get-ChildItem -Force"}',
        "无交互输入，默认拒绝。",
        "  ✗ denied",
        '→ shell {"command":"Get-Content README.md"}',
        "无交互输入，默认拒绝。",
        "  ✗ denied",
        "",
      ].join("\n"),
    );
    const chapterOneFinal = chapterOneWalkthrough.messages.at(-1)?.content ?? "";
    expect(chapterOneFinal.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${chapterOneFinal}\n`);
    expect(readdirSync(workspace)).toEqual(["README.md"]);
  });
});
