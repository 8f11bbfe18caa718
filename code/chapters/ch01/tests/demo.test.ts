import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { prepareDemo } from "../src/cli/demo.js";

const entry = fileURLToPath(new URL("../src/chapters/ch01.ts", import.meta.url));
/** Chapter 1's own walkthrough: what `npm run ch01 -- --demo` replays (prepareDemo(1) reads demo/ch01.json). */
const walkthrough = JSON.parse(readFileSync(new URL("../demo/ch01.json", import.meta.url), "utf8")) as {
  messages: { role: string; content: string | null }[];
};
/** The walkthrough's last assistant turn: the demo's final answer. */
const finalText = walkthrough.messages.at(-1)?.content ?? "";
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const demoRoots: string[] = [];

afterEach(async () => {
  await Promise.all(demoRoots.splice(0).map((root) => rm(root, { recursive: true, force: true })));
});

describe("the chapter 1 demo without a terminal", () => {
  it("needs no key, refuses both shell calls for want of a TTY with 无交互输入，默认拒绝。, and ends with exit 0", () => {
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
        '→ shell {"command":"Get-ChildItem -Force"}',
        "无交互输入，默认拒绝。",
        "  ✗ denied",
        '→ shell {"command":"Get-Content README.md"}',
        "无交互输入，默认拒绝。",
        "  ✗ denied",
        "",
      ].join("\n"),
    );
    expect(finalText.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(readdirSync(workspace)).toEqual(["README.md"]);
  });
});

describe("prepareDemo(chapter)", () => {
  it("prepareDemo(1) replays demo/ch01.json in a fresh workspace holding only README.md", async () => {
    const file = JSON.parse(readFileSync(new URL("../demo/ch01.json", import.meta.url), "utf8")) as {
      chapter: number;
      messages: { role: string; content: string | null }[];
    };
    const setup = await prepareDemo(1);
    demoRoots.push(dirname(setup.workspace));
    expect(file.chapter).toBe(1);
    expect(setup.transcript.chapter).toBe(1);
    expect(setup.prompt).toBe(file.messages.find((message) => message.role === "user")?.content);
    expect(setup.transcript.messages.map((message) => [message.role, message.content])).toEqual(
      file.messages.map((message) => [message.role, message.content]),
    );
    expect(readdirSync(setup.workspace)).toEqual(["README.md"]);
  });
});
