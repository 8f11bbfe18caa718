import { realpathSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { ptyAvailable, runOnTerminal, type Screen, type TerminalRun } from "./support/terminal-screen.js";

// The approval question as a person sees it, when the model's replies are the attacker's: the real CLI
// replays a hostile transcript under a pseudo-terminal, and its output is drawn on an 80×24 terminal
// emulator. What counts is the screen at the moment the question is asked.

const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const entry = (chapter: number): string => fileURLToPath(new URL(`../src/chapters/ch0${chapter}.ts`, import.meta.url));
/** The audit record a terminal approval writes; the attacker prints it to look approved. */
const FORGED_AUDIT = "[Permission] shell: allow (terminal-approval) - User approved this tool call";
const QUESTION_ROW = "允许本次调用? [y/N]";

const folders: string[] = [];
afterEach(async () => {
  await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

interface Turn {
  readonly calls?: readonly { readonly name: string; readonly arguments: Record<string, unknown> }[];
  readonly content?: string;
}

/** `run --chapter N --replay` of the model's `turns`, on a terminal: the hostile model is the recording. */
async function replayOnTerminal(
  chapter: number,
  turns: readonly Turn[],
  options: { readonly typeAhead?: string; readonly answers?: readonly string[]; readonly waitMs?: number } = {},
): Promise<TerminalRun> {
  const folder = realpathSync(await mkdtemp(join(tmpdir(), "approval-screen-")));
  folders.push(folder);
  let id = 0;
  const messages = [
    { role: "user", content: "Tidy up the workspace" },
    ...turns.map((turn) => ({
      role: "assistant",
      content: turn.content ?? null,
      ...(turn.calls === undefined
        ? {}
        : {
            tool_calls: turn.calls.map((call) => ({
              id: `call_${(id += 1)}`,
              type: "function",
              function: { name: call.name, arguments: JSON.stringify(call.arguments) },
            })),
          }),
    })),
  ];
  const transcript = join(folder, "hostile.json");
  await writeFile(transcript, JSON.stringify({ chapter, messages }));
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_") && key !== "INIT_CWD"),
  );
  return runOnTerminal(
    [process.execPath, "--import", tsx, entry(chapter), "--replay", transcript, "--workspace", folder],
    { env, cwd: folder, answers: options.answers ?? ["n\n"], ...options },
  );
}

/** The rows of the screen from the top down to the question (the cursor's row). */
const upToQuestion = (screen: Screen): string[] => screen.rows.slice(0, screen.cursorRow + 1);

/** The columns a terminal gives `text`: two for a CJK character, one for the rest of what these tests use. */
function width(text: string): number {
  let columns = 0;
  for (const char of text) columns += char.charCodeAt(0) > 0x2e7f ? 2 : 1;
  return columns;
}
/** `text` padded with spaces to the end of its 80-column row. */
const row = (text: string): string => text + " ".repeat((80 - (width(text) % 80)) % 80);

describe.skipIf(!ptyAvailable)("the approval question on an 80×24 terminal, under a hostile model", () => {
  it("a command padded to scroll its start away, ending in a fake approval block: the real header and the command's first line stay in view, and the row above the question is the command", async () => {
    // Aimed at the book's single 参数 line: after `参数: {"command":"` the padding fills rows until the
    // real start has scrolled off, then each fake line fills one row of its own.
    const real = "Remove-Item -Recurse -Force ~";
    const command =
      row(`参数: {"command":"${real}`).slice('参数: {"command":"'.length) +
      " ".repeat(80 * 30) +
      row("工具调用需要批准: shell") +
      row("原因: PowerShell command execution requires explicit approval.") +
      "参数: {“command”:“Get-ChildItem”";
    const run = await replayOnTerminal(1, [{ calls: [{ name: "shell", arguments: { command } }] }, { content: "ok" }]);
    expect(run.code).toBe(0);
    expect(run.questions).toHaveLength(1);
    const screen = run.questions[0] as Screen;
    const rows = upToQuestion(screen);
    expect(rows.at(-1)).toBe(QUESTION_ROW);
    // The real first line is the whole command: its start, the padding counted, and its end.
    expect(rows.at(-2)).toMatch(/^命令: Remove-Item -Recurse -Force ~\[2433 个空白\]\[省略 168 个字符\]t-ChildItem”$/);
    // The real header and its reason are on screen, once; the fake 参数 line is not a row of its own.
    const headers = rows.filter((text) => text.startsWith("工具调用需要批准"));
    expect(headers).toEqual(["工具调用需要批准: shell"]);
    expect(rows[rows.indexOf("工具调用需要批准: shell") + 1]).toMatch(/^原因: /);
    expect(rows.filter((text) => text.startsWith("参数:"))).toHaveLength(1);
    expect(rows.find((text) => text.startsWith("参数:"))).toMatch(/^参数: \{"command":"Remove-Item -Recurse -Force ~/);
    expect(run.last.rows).toContain("  ✗ denied");
  });

  it("a forged [Permission] record in an argument or in the final answer never shows as a row of its own", async () => {
    // Filler that would put the forged record at the start of the next row of the book's 参数 line.
    const command = `Get-ChildItem${".".repeat(80 - width('参数: {"command":"Get-ChildItem'))}${FORGED_AUDIT}`;
    const answer = `已完成。\n${FORGED_AUDIT}\n${FORGED_AUDIT.replace("[Permission]", "  [Permission]")}`;
    const run = await replayOnTerminal(1, [
      { calls: [{ name: "shell", arguments: { command } }] },
      { content: answer },
    ]);
    expect(run.code).toBe(0);
    const rows = upToQuestion(run.questions[0] as Screen);
    expect(rows.at(-1)).toBe(QUESTION_ROW);
    expect(rows.at(-2)).toBe("命令: Get-ChildItem.............................[省略 82 个字符]this tool call");
    expect(rows.filter((text) => text.trimStart().startsWith("[Permission]"))).toEqual([]);
    const last = run.last.rows;
    expect(last.filter((text) => text.trimStart().startsWith("[Permission]"))).toEqual([]);
    // Marked as the answer's; too wide for one row, its end wraps to the next.
    expect(last.filter((text) => /^\(回答\) +\[Permission\] shell: allow/.test(text))).toHaveLength(2);
    expect(last).toContain("已完成。");
  });

  it("bidi controls and zero-width characters in a command appear escaped, with the note above the question", async () => {
    // Shown raw, U+202E would draw the rest of the command right to left.
    const command = "Write-Output \u202e~ ecrof- esrucer- meti-evomer\u202c\u200b";
    const run = await replayOnTerminal(1, [{ calls: [{ name: "shell", arguments: { command } }] }, { content: "ok" }]);
    const rows = upToQuestion(run.questions[0] as Screen);
    expect(rows.slice(-3)).toEqual([
      "注意: 参数里有不显示的字符 (双向控制、零宽字符等), 上面已写成 \\u… 转义。",
      "命令: Write-Output \\u202e~ ecrof- esrucer- meti-evomer\\u202c\\u200b",
      QUESTION_ROW,
    ]);
    expect(rows.join("\n")).not.toMatch(/[\u202a-\u202e\u200b]/);
    const at = rows.findIndex((text) => text.startsWith("参数:"));
    expect(rows.slice(at, at + 2)).toEqual([
      '参数: {"command":"Write-Output \\u202e~ ecrof- esrucer- meti-evomer\\u202c\\u200b"',
      "    | }",
    ]);
  });

  it("a y typed before the question appears does not answer it: the question waits, and an n typed after it refuses", async () => {
    const run = await replayOnTerminal(
      1,
      [{ calls: [{ name: "shell", arguments: { command: "Write-Output typed-ahead" } }] }, { content: "ok" }],
      { typeAhead: "y\n", answers: ["n\n"], waitMs: 500 },
    );
    expect(run.code).toBe(0);
    expect(run.questions).toHaveLength(1);
    expect(run.whileWaiting).toEqual([""]);
    expect(run.last.rows).toContain("  ✗ denied");
  });

  // The terminal's line discipline hands the program one typed line per read, and on a loaded machine the queued
  // `y` can be handed over only after the second question is printed: the program then cannot tell it from a `y`
  // typed at the question. That is the kernel's scheduling, not the rule, so the run is tried up to three times; an
  // implementation that lets a queued answer through fails every time.
  it(
    "an answer queued after the first question does not answer the second; a y typed once it is asked does",
    { retry: 2 },
    async () => {
      const calls = [
        { name: "shell", arguments: { command: "Write-Output first" } },
        { name: "shell", arguments: { command: "Write-Output second" } },
      ];
      const run = await replayOnTerminal(1, [{ calls }, { content: "ok" }], {
        answers: ["n\ny\n", "y\n"],
        waitMs: 500,
      });
      expect(run.code).toBe(0);
      expect(run.questions).toHaveLength(2);
      expect(run.whileWaiting).toEqual(["", ""]);
      const results = run.last.rows.filter((text) => /^ {2}[✓✗]/.test(text));
      expect(results[0]).toBe("  ✗ denied");
      expect(results[1]).not.toBe("  ✗ denied");
    },
  );
});

describe.skipIf(!ptyAvailable)("chapter 3's write question on an 80×24 terminal", () => {
  it("a path reordered by a right-to-left override shows in its real order, escaped, right above the question", async () => {
    const path = "invoice\u202etxt.exe";
    const run = await replayOnTerminal(3, [
      { calls: [{ name: "write_file", arguments: { path, content: "MZ" } }] },
      { content: "ok" },
    ]);
    expect(run.code).toBe(0);
    const rows = upToQuestion(run.questions[0] as Screen);
    expect(rows.slice(-4)).toEqual([
      '参数: {"path":"invoice\\u202etxt.exe","content":"MZ"}',
      "注意: 参数里有不显示的字符 (双向控制、零宽字符等), 上面已写成 \\u… 转义。",
      "路径: invoice\\u202etxt.exe",
      QUESTION_ROW,
    ]);
    expect(run.last.rows).toContain("[Permission] write_file: deny (terminal-approval) - User denied this tool call");
  });
});
