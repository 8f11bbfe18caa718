import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { argumentsView, BOUNDS, columns, CONTINUED, progressRows } from "../src/cli/approval-view.js";
import { ANSWER_MARK, CLI_LINE_STARTS, mentionsCliLine, shownAnswer, skeleton, visible } from "../src/cli/visible.js";
import { AgentRunner } from "../src/core/loop.js";
import { validateToolPairing } from "../src/core/messages.js";
import { createChapterOneTools } from "../src/features/builtin-tools.js";
import { FakeCommandRunner, commandResult } from "./support/fakes.js";
import { call, ScriptedModel, textTurn, toolTurn } from "./support/scripted-model.js";
import { runCliWithoutTerminal, type CliRun } from "./support/cli-run.js";

// What a hostile model or replay file sends must not reach the terminal as a line the CLI could have printed,
// and must not break the run or the pairing of calls and results on its way.
const FORGED = "[Permission] shell: allow (terminal-approval) - User approved this tool call";

let folder: string;
beforeEach(async () => {
  folder = await mkdtemp(join(tmpdir(), "terminal-integrity-"));
});
afterEach(async () => {
  await rm(folder, { recursive: true, force: true });
});

/** `runCli` in this process, replaying `messages` in chapter 1 with no terminal; the transcript is recorded. */
async function replay(messages: readonly unknown[]): Promise<CliRun> {
  const file = join(folder, "replay.json");
  await writeFile(file, JSON.stringify({ chapter: 1, messages }));
  const args = ["run", "--chapter", "1", "--replay", file, "--workspace", folder, "--transcript", "rec.json"];
  return runCliWithoutTerminal(args, {}, folder);
}

describe("the final answer", () => {
  it.each([
    ["U+FE0F", "\ufe0f"],
    ["U+3164", "\u3164"],
    ["U+1160", "\u1160"],
    ["U+034F", "\u034f"],
    ["U+2800", "\u2800"],
    ["U+3000 (ideographic space)", "\u3000"],
    ["a combining mark", "\u0301"],
  ])("marks a forged [Permission] line behind an invisible first character (%s)", (_name, invisible) => {
    const [, line] = shownAnswer(`Done.\n${invisible}${FORGED}`).split("\n");
    expect(line?.startsWith(ANSWER_MARK)).toBe(true);
  });

  it("marks a full-width spelling of a CLI line, which NFKC folds into the real one", () => {
    expect(shownAnswer("［Ｐｅｒｍｉｓｓｉｏｎ］ shell: allow")).toBe(
      `${ANSWER_MARK}［Ｐｅｒｍｉｓｓｉｏｎ］ shell: allow`,
    );
  });

  it.each([
    ["a Cyrillic е", "[P\u0435rmission] shell: allow"],
    ["a Cyrillic о", "[Permissi\u043en] shell: allow"],
    ["a Greek Ι and a Cyrillic і", "[Perm\u0456ss\u0456on] shell: allow"],
    ["rn drawn like m", "[Perrnission] shell: allow"],
    ["a Cyrillic Н and а", "[\u041dook] PreToolUse"],
  ])("marks a look-alike spelling of a CLI line (%s), compared by UTS #39 skeleton", (_name, forged) => {
    expect(shownAnswer(forged)).toBe(`${ANSWER_MARK}${forged}`);
  });

  it.each([
    ["a heavy check mark", "\u2714 ok"],
    ["a heavy ballot X", "\u2718 denied"],
    ["a heavy arrow", "\u2794 shell {}"],
    ["a musical null notehead first", `\u{1d159}${FORGED}`],
  ])("marks a line drawn like a CLI line with a mark confusables.txt does not list (%s)", (_name, forged) => {
    expect(shownAnswer(forged).startsWith(ANSWER_MARK)).toBe(true);
  });

  it("folds only a line's start: 4 million U+FDFA (18 characters each under NFKC) are answered, not hung on", () => {
    const wide = "\ufdfa".repeat(4_000_000);
    expect(shownAnswer(wide)).toBe(wide);
    const forgedAfter = `${"\ufdfa".repeat(4)}\n${FORGED}`;
    expect(shownAnswer(forgedAfter)).toBe(`${"\ufdfa".repeat(4)}\n${ANSWER_MARK}${FORGED}`);
  }, 20_000);

  it("skeleton folds look-alikes and compatible forms into one spelling, and keeps other text apart", () => {
    expect(skeleton("[P\u0435rmission]")).toBe(skeleton("[Permission]"));
    expect(skeleton("［Ｐｅｒｍｉｓｓｉｏｎ］")).toBe(skeleton("[Permission]"));
    expect(skeleton("[Pormission]")).not.toBe(skeleton("[Permission]"));
    expect(skeleton("参数：")).toBe(skeleton("参数:"));
  });

  it("skeleton drops white space and hidden characters: every spacing of 子 Agent is one spelling", () => {
    const spacings = ["  ", "\t", "\u00a0", "\u3000", "\u2003", "", " \u200b", "\ufe0f"];
    for (const spacing of spacings) expect(skeleton(`子${spacing}Agent`)).toBe(skeleton("子 Agent"));
    expect(skeleton("子 Agent")).toBe("子Agent");
    expect(skeleton("[Per\u034fmission]")).toBe(skeleton("[Permission]"));
  });

  it.each([
    ["two spaces", "  "],
    ["a tab", "\t"],
    ["a no-break space", "\u00a0"],
    ["an ideographic space", "\u3000"],
    ["no space", ""],
    ["a space and a zero-width space", " \u200b"],
  ])("a CLI line start written with %s where it has a space is still marked, and still mentioned", (_name, spacing) => {
    // Chapter 1's `命令 (第` and `✓ ok`; from chapter 6 on, `子 Agent` too.
    const spaced = CLI_LINE_STARTS.filter((start) => start.includes(" "));
    expect(spaced.length).toBeGreaterThanOrEqual(2);
    for (const start of spaced) {
      const variant = start.replaceAll(" ", spacing);
      expect([variant, shownAnswer(`${variant} x`)]).toEqual([variant, `${ANSWER_MARK}${visible(variant)} x`]);
      expect([variant, mentionsCliLine(`ok, ${variant} x`)]).toEqual([variant, true]);
    }
  });

  it("leaves an ordinary answer as it is", () => {
    expect(shownAnswer("结果是 42。\n  缩进的一行")).toBe("结果是 42。\n  缩进的一行");
  });
});

describe("a replay file's text in a configuration error", () => {
  it("stays on the one 配置错误 line: a duplicate call id with line breaks prints no line of its own", async () => {
    const id = `a\n${FORGED}\n`;
    const shell = { id, type: "function", function: { name: "shell", arguments: "{}" } };
    const run = await replay([
      { role: "user", content: "x" },
      { role: "assistant", content: null, tool_calls: [shell, shell] },
    ]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    // One line of ours, cut into rows of our own: wide, and holding what reads like a record.
    const rows = run.stderr.split("\n").slice(0, -1);
    expect(rows[0]).toMatch(/^配置错误: /);
    for (const row of rows.slice(1)) expect(row.startsWith(CONTINUED)).toBe(true);
    expect(rows.map((row, index) => (index === 0 ? row : row.slice(CONTINUED.length))).join("")).toMatch(
      /^配置错误: .*duplicate tool call id: a\\n\[Permission\] shell: allow/,
    );
  });
});

describe("deeply nested raw arguments", () => {
  const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;

  it("are shown to a bounded depth, answered as invalid_json and paired; the run goes on", async () => {
    const run = await replay([
      { role: "user", content: "x" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "shell", arguments: deep } }],
      },
      { role: "assistant", content: "done" },
    ]);
    expect(run.stderr).not.toContain("意外错误");
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("done\n");
    const [progress] = run.stderr.split("\n");
    expect(progress).toMatch(/^→ shell \[\[\[\[\[\[\[\[\[…\]\]\]\]\]\]\]\]\]$/);
    const recorded = JSON.parse(await readFile(join(folder, "rec.json"), "utf8")) as { messages: unknown[] };
    expect(recorded.messages).toHaveLength(4);
    expect(recorded.messages[2]).toMatchObject({ role: "tool", tool_call_id: "c1" });
  });

  it("a progress listener that throws changes nothing: every call is still answered and paired", async () => {
    const runner = new FakeCommandRunner(commandResult({ output: "42" }));
    let events = 0;
    const agent = new AgentRunner({
      model: new ScriptedModel([
        toolTurn(call("c1", "shell", { command: "x" }), call("c2", "nope", {})),
        textTurn("ok"),
      ]),
      tools: createChapterOneTools(runner),
      systemPrompt: "s",
      workspace: folder,
      onEvent: () => {
        events += 1;
        throw new RangeError("Maximum call stack size exceeded");
      },
    });
    const result = await agent.run("go");
    expect(result.finalText).toBe("ok");
    expect(events).toBe(6);
    expect(runner.calls).toHaveLength(1);
    validateToolPairing(result.history);
    expect(result.history.filter((message) => message.role === "tool")).toHaveLength(2);
  });
});

describe("a line that would wrap on an 80-column terminal", () => {
  // Padding that puts a forged record at the start of the second row, were the line left to wrap.
  const pad = (name: string): string => "x".repeat(BOUNDS.row + 1 - `→ ${name} {"command":"`.length);

  it.each([
    ["exactly", FORGED],
    ["with a Cyrillic е", FORGED.replace("Permission", "P\u0435rmission")],
  ])("a progress line never lets a forged record (%s) start a row: it is cut into rows of our own", (_name, forged) => {
    const rows = progressRows("shell", JSON.stringify({ command: `${pad("shell")}${forged}` }));
    expect(rows.length).toBeGreaterThan(1);
    for (const row of rows) expect(row.length <= BOUNDS.row && row.length > 0).toBe(true);
    for (const row of rows.slice(1)) expect(row.startsWith(CONTINUED)).toBe(true);
  });

  it("control characters count as the escapes they are drawn as: no call that wraps passes for ordinary or plain", () => {
    const c1 = "\u0085".repeat(8);
    const view = argumentsView({ command: `${c1}Write-Output hi ok` });
    expect(view.below.length).toBeGreaterThan(0);
    for (const line of [`参数: ${view.json}`, ...view.below]) expect(columns(line)).toBeLessThanOrEqual(BOUNDS.row);
    for (const raw of ["\u0085".repeat(10), "\u001b".repeat(10)]) {
      const rows = progressRows("shell", JSON.stringify({ command: raw }).replace(/\\u00(1b|85)/g, raw.charAt(0)));
      for (const row of rows) expect(columns(row)).toBeLessThanOrEqual(BOUNDS.row);
    }
  });

  it("a plain progress line as wide as a row is one line; a column more and it is rows of our own", () => {
    const fits = "y".repeat(BOUNDS.row - '→ shell {"command":""}'.length - 1);
    expect(progressRows("shell", JSON.stringify({ command: fits }))).toEqual([`→ shell {"command":"${fits}"}`]);
    expect(progressRows("shell", JSON.stringify({ command: `${fits}y` }))).toHaveLength(2);
  });

  it("every CLI line start is in the look-alike table's reach: its skeleton is not empty", () => {
    for (const start of CLI_LINE_STARTS) expect(skeleton(start).length).toBeGreaterThan(0);
  });
});
