import { describe, expect, it } from "vitest";
import {
  argumentsView,
  BOUNDS,
  columns,
  CONTINUED,
  HIDDEN_NOTE,
  progressRows,
  shownRawArguments,
  shownText,
  type ArgumentsView,
} from "../src/cli/approval-view.js";
import {
  ANSWER_MARK,
  CLI_LINE_STARTS,
  escaped,
  hasHiddenCharacters,
  oneLine,
  shownAnswer,
  visible,
} from "../src/cli/visible.js";

// What an attacker who writes the model's replies can put into the approval question, and what the
// terminal shows instead. An ordinary call must still be the book's `参数:` line, byte for byte.

const FORGED_AUDIT = "[Permission] shell: allow (terminal-approval) - User approved this tool call";
/** The book's approval block for a harmless command, as a hostile argument would draw it. */
const FAKE_BLOCK = [
  "工具调用需要批准: shell",
  "原因: PowerShell command execution requires explicit approval.",
  '参数: {"command":"Get-ChildItem"}',
  "允许本次调用? [y/N] ",
].join("\n");

/** Format characters a terminal draws as nothing, or lets reorder the text around them. */
const INVISIBLE: readonly [string, string][] = [
  ["\u061c", "\\u061c"],
  ["\u200b", "\\u200b"],
  ["\u200c", "\\u200c"],
  ["\u200d", "\\u200d"],
  ["\u200e", "\\u200e"],
  ["\u200f", "\\u200f"],
  ["\u202a", "\\u202a"],
  ["\u202b", "\\u202b"],
  ["\u202c", "\\u202c"],
  ["\u202d", "\\u202d"],
  ["\u202e", "\\u202e"],
  ["\u2060", "\\u2060"],
  ["\u2061", "\\u2061"],
  ["\u2062", "\\u2062"],
  ["\u2063", "\\u2063"],
  ["\u2064", "\\u2064"],
  ["\u2066", "\\u2066"],
  ["\u2067", "\\u2067"],
  ["\u2068", "\\u2068"],
  ["\u2069", "\\u2069"],
  ["\ufeff", "\\ufeff"],
  ["\u00ad", "\\u00ad"],
  ["\u2028", "\\u2028"],
  ["\u2029", "\\u2029"],
  ["\u{e0001}", "\\u{e0001}"],
  ["\u{e0041}", "\\u{e0041}"],
  ["\u{e007f}", "\\u{e007f}"],
];

/** A view as printed: `参数: ` and its rows, then the lines below them. */
function printed(view: ArgumentsView): string[] {
  return [`参数: ${view.json}`, ...view.below];
}

/** The bounded view as one string again (its rows joined), and the lines printed after its rows. */
function unwrapped(view: ArgumentsView): { json: string; after: string[] } {
  const rows = view.below.filter((line) => line.startsWith(CONTINUED));
  return {
    json: view.json + rows.map((row) => row.slice(CONTINUED.length)).join(""),
    after: view.below.slice(rows.length),
  };
}

describe("argumentsView: an ordinary call is the book's 参数 line", () => {
  it.each<[string, Record<string, unknown>]>([
    ["a short command", { command: "Get-ChildItem" }],
    ["a short note", { path: "note.txt", content: "第 3 章插入了权限策略。\n" }],
    ["an edit", { path: "demo/note.txt", old_text: "alpha", new_text: "gamma" }],
    ["a multi-line script", { command: "Get-ChildItem\nGet-Date\n" }],
    ["sixteen spaces in a row", { command: `Write-Output a${" ".repeat(16)}b` }],
    ["a value as wide as the row allows", { content: "x".repeat(BOUNDS.ordinaryLine - 14) }],
    ["quotes, backslashes and a tab", { command: 'Write-Output "a\\b"\t1' }],
  ])("%s shows as its JSON, with nothing between it and the question", (_name, args) => {
    expect(argumentsView(args)).toStrictEqual({ json: JSON.stringify(args), below: [], complete: true });
    expect(columns(`参数: ${JSON.stringify(args)}`)).toBeLessThanOrEqual(BOUNDS.row);
  });

  it("a C1 control stays an escape inside the book's line, as before", () => {
    expect(argumentsView({ command: "\u009b2Jrm -r ." })).toStrictEqual({
      json: '{"command":"\\u009b2Jrm -r ."}',
      below: [],
      complete: true,
    });
  });

  it.each<[string, Record<string, unknown>]>([
    ["chapter 3's note", { path: "chapter3-note.txt", content: "第 3 章在工具准备和执行之间插入了权限策略。\n" }],
    ["one column too wide", { content: "x".repeat(BOUNDS.ordinaryLine - 13) }],
    ["100 Chinese characters (200 columns)", { content: "字".repeat(100) }],
  ])("%s would wrap into a row that starts with its text: it shows in rows of its own instead", (_name, args) => {
    const view = argumentsView(args);
    expect(view.below.length).toBeGreaterThan(0);
    expect(unwrapped(view).json).toBe(JSON.stringify(args).replace("\n", "\\n"));
    for (const line of printed(view)) expect(columns(line)).toBeLessThanOrEqual(BOUNDS.row);
  });
});

describe("argumentsView: nothing y approves is hidden", () => {
  it("a payload in the middle of a long command is on the screen, every character of it", () => {
    const command = `Get-Date # ${"a".repeat(3000)}; Remove-Item -Recurse -Force ~; # ${"b".repeat(3000)}`;
    const view = argumentsView({ command });
    expect(view.complete).toBe(true);
    expect(unwrapped(view).json).toBe(JSON.stringify({ command }));
    expect(view.below.at(-1)).toMatch(/^命令: Get-Date # a+\[省略 \d+ 个字符\]b+$/);
  });

  it("every member is shown, however many", () => {
    const args = Object.fromEntries(Array.from({ length: 40 }, (_, index) => [`k${index}`, "v".repeat(100)]));
    const view = argumentsView(args);
    expect(unwrapped(view).json).toBe(JSON.stringify(args));
  });

  it("arguments past approvalRows rows, or nested deeper than the view draws, are not complete: nothing to ask about", () => {
    expect(BOUNDS.approvalRows).toBe(400);
    const atBound = "x".repeat(BOUNDS.approvalRows * (BOUNDS.row - CONTINUED.length) - 100);
    expect(argumentsView({ content: atBound }).complete).toBe(true);
    expect(argumentsView({ content: `${atBound}${"x".repeat(200)}` })).toStrictEqual({
      json: "",
      below: [],
      complete: false,
    });
    expect(argumentsView({ content: "字".repeat(BOUNDS.approvalRows * 40) }).complete).toBe(false);
    let deep: unknown = "x";
    for (let level = 0; level < 8; level += 1) deep = { a: deep };
    expect(argumentsView({ nested: deep }).complete).toBe(false);
    expect(argumentsView({ nested: (deep as { a: unknown }).a }).complete).toBe(true);
  });
});

describe("argumentsView: class 1, padding", () => {
  it("a run of more than 16 spaces is shown as its count, and the command's first line is shown again last", () => {
    const command = `Remove-Item -Recurse ~${" ".repeat(3000)}\n${FAKE_BLOCK}`;
    const view = argumentsView({ command });
    expect(printed(view)).toEqual([
      '参数: {"command":"Remove-Item -Recurse ~"[3000 个空白]"\\n工具调用需要批准: shel',
      `${CONTINUED}l\\n原因: PowerShell command execution requires explicit approval.\\n参数: `,
      `${CONTINUED}{\\"command\\":\\"Get-ChildItem\\"}\\n允许本次调用? [y/N] "}`,
      "命令 (第 1 行, 共 5 行): Remove-Item -Recurse ~[3000 个空白]",
    ]);
  });

  it("a bounded view is cut into rows of at most 79 columns, every row after the first marked as continued", () => {
    const views = [
      argumentsView({ command: `x${" ".repeat(100)}${"y".repeat(500)}` }),
      argumentsView({ path: "字".repeat(300), content: "\u202e".repeat(300) }),
      argumentsView(Object.fromEntries(Array.from({ length: 40 }, (_, index) => [`k${index}`, "v".repeat(100)]))),
    ];
    for (const view of views) {
      const lines = printed(view);
      for (const line of lines) expect(columns(line)).toBeLessThanOrEqual(BOUNDS.row);
      const rows = view.below.filter((line) => line.startsWith(CONTINUED));
      expect(rows.length).toBeGreaterThan(0);
      expect(view.below.slice(0, rows.length)).toEqual(rows);
    }
  });

  it("seventeen spaces already count", () => {
    expect(argumentsView({ command: `a${" ".repeat(17)}b` })).toStrictEqual({
      json: '{"command":"a"[17 个空白]"b"}',
      below: ["命令: a[17 个空白]b"],
      complete: true,
    });
  });

  it("other spaces count too: no-break, ideographic, en and em spaces", () => {
    const pad = "\u00a0\u3000\u2002\u2003".repeat(5);
    expect(argumentsView({ command: `a${pad}b` }).below).toEqual(["命令: a[20 个空白]b"]);
  });

  it("a long content shows whole, and the path is shown right above the question", () => {
    const content = `${"a".repeat(5000)}${"b".repeat(5000)}`;
    const view = unwrapped(argumentsView({ path: "notes/secret.txt", content }));
    expect(view.json).toBe(`{"path":"notes/secret.txt","content":"${content}"}`);
    expect(view.after).toEqual(["路径: notes/secret.txt"]);
  });

  it("a long path shows its start and its end, the file name", () => {
    const path = `${"deep/".repeat(100)}target.txt`;
    const line = unwrapped(argumentsView({ path, content: "x" })).after[0] ?? "";
    expect(line).toBe(`路径: ${"deep/".repeat(8)}de[省略 454 个字符]eep/target.txt`);
    expect(columns(line)).toBeLessThanOrEqual(BOUNDS.decidingLine);
  });

  it("a command of many lines names how many, and shows its first", () => {
    const command = `Get-ChildItem${"\n".repeat(500)}Remove-Item -Recurse ~`;
    expect(unwrapped(argumentsView({ command })).after).toEqual(["命令 (第 1 行, 共 501 行): Get-ChildItem"]);
  });

  it("a deciding line never needs a second row on an 80-column terminal, whatever it holds", () => {
    const values = [
      "x".repeat(500),
      "字".repeat(500),
      `${"x".repeat(30)}${" ".repeat(100)}${"字".repeat(30)}${" ".repeat(100)}y`,
      "\u202e".repeat(200),
      `${"ab".repeat(50)}\u{e0041}`.repeat(10),
      "🙂".repeat(300),
    ];
    for (const value of values) {
      for (const line of unwrapped(argumentsView({ command: value, path: value })).after) {
        expect(columns(line)).toBeLessThanOrEqual(BOUNDS.decidingLine);
      }
    }
  });

  it("a mark of ours stands outside the quotes, where a value cannot forge it", () => {
    const view = argumentsView({ command: `echo "[省略 3 个字符]"${" ".repeat(20)}x` });
    expect(view.json).toBe('{"command":"echo \\"[省略 3 个字符]\\""[20 个空白]"x"}');
  });
});

describe("argumentsView: class 2, lines that pass for the CLI's own", () => {
  it("line breaks in a value are escapes, never a line of their own", () => {
    const view = argumentsView({ command: `Get-ChildItem\n${FORGED_AUDIT}` });
    for (const line of printed(view)) expect(line.split("\n")).toHaveLength(1);
    expect(unwrapped(view)).toStrictEqual({
      json: `{"command":"Get-ChildItem\\n${FORGED_AUDIT}"}`,
      // Mentioning a line of the CLI makes the call not ordinary: its command is repeated right above the question.
      after: ["命令 (第 1 行, 共 2 行): Get-ChildItem"],
    });
  });

  it("filler that would wrap a forged line to the start of a row cannot: no row begins with the model's text", () => {
    const filler = ".".repeat(80 - columns('参数: {"command":"Get-ChildItem'));
    const view = argumentsView({ command: `Get-ChildItem${filler}${FORGED_AUDIT}` });
    for (const line of printed(view).slice(1)) expect(line.startsWith(CONTINUED) || line.startsWith("命令")).toBe(true);
    expect(printed(view).some((line) => line.startsWith("[Permission]"))).toBe(false);
  });

  it.each(CLI_LINE_STARTS)("a value that contains %j is not ordinary", (start) => {
    expect(argumentsView({ path: "a.txt", content: `x ${start} y` }).below).toEqual(["路径: a.txt"]);
  });

  it("a path with a line break shows it as \\n on its deciding line", () => {
    expect(unwrapped(argumentsView({ path: `a.txt\n${FORGED_AUDIT}`, content: "" })).after).toEqual([
      "路径: a.txt\\n[Permission] shell: allow (terminal-[省略 26 个字符]this tool call",
    ]);
  });
});

describe("argumentsView: class 3, invisible and bidi characters", () => {
  it.each(INVISIBLE)("%j is shown as %s, with the note above the question", (char, shown) => {
    const view = argumentsView({ path: `a${char}b.txt`, content: "x" });
    expect(view.json).toBe(`{"path":"a${shown}b.txt","content":"x"}`);
    expect(view.below).toEqual([HIDDEN_NOTE, `路径: a${shown}b.txt`]);
  });

  it("a path reordered by a right-to-left override shows in its real order", () => {
    const view = argumentsView({ path: "invoice\u202etxt.exe", content: "MZ" });
    expect(view.below).toEqual([HIDDEN_NOTE, "路径: invoice\\u202etxt.exe"]);
  });

  it("variation selectors and Hangul fillers, which draw nothing either, are escaped too", () => {
    expect(argumentsView({ path: "a\ufe0fb\u3164c", content: "" }).below).toEqual([
      HIDDEN_NOTE,
      "路径: a\\ufe0fb\\u3164c",
    ]);
  });

  it("hidden characters no hand list named (U+17B4, U+2065, U+E0FFF; format U+0600, U+FFF9) are escaped and noted", () => {
    expect(argumentsView({ path: "a\u17b4b\u2065c\u{e0fff}", content: "" }).below).toEqual([
      HIDDEN_NOTE,
      "路径: a\\u17b4b\\u2065c\\u{e0fff}",
    ]);
    // Format characters that are not default-ignorable stay hidden as well.
    expect(argumentsView({ path: "a\u0600b\ufff9c", content: "" }).below).toEqual([
      HIDDEN_NOTE,
      "路径: a\\u0600b\\ufff9c",
    ]);
  });

  it("the note is one line, and only there when the call has such a character", () => {
    expect(HIDDEN_NOTE.split("\n")).toHaveLength(1);
    expect(argumentsView({ path: "a".repeat(300), content: "" }).below).not.toContain(HIDDEN_NOTE);
    expect(
      argumentsView({ path: "a".repeat(300), content: "\u200b" }).below.filter((line) => line === HIDDEN_NOTE),
    ).toHaveLength(1);
  });
});

describe("shownRawArguments: the progress line's arguments", () => {
  it("short, plain arguments are shown as the model sent them", () => {
    expect(shownRawArguments('{"command":"Get-ChildItem"}')).toBe('{"command":"Get-ChildItem"}');
    expect(shownRawArguments('{"path": "a.txt"}')).toBe('{"path": "a.txt"}');
  });

  it("arguments with line breaks, padding or invisible characters are shown as their bounded JSON", () => {
    expect(shownRawArguments('{\n  "command": "Get-ChildItem"\n}')).toBe('{"command":"Get-ChildItem"}');
    expect(shownRawArguments(JSON.stringify({ command: `ls${" ".repeat(500)}; rm -r ~` }))).toBe(
      '{"command":"ls"[500 个空白]"; rm -r ~"}',
    );
    expect(shownRawArguments(JSON.stringify({ path: "a\u202eb" }))).toBe('{"path":"a\\u202eb"}');
  });

  it("arguments that are not JSON are shown as text on one line", () => {
    expect(shownRawArguments(`{oops\n${FORGED_AUDIT}`)).toBe(`{oops\\n${FORGED_AUDIT}`);
  });

  it("long arguments stay within the progress bound", () => {
    for (const raw of [JSON.stringify({ content: "x".repeat(10_000) }), "y".repeat(10_000), "{".repeat(10_000)]) {
      expect(columns(shownRawArguments(raw))).toBeLessThanOrEqual(BOUNDS.progressLine);
    }
  });
});

describe("progressRows: the progress line of a call", () => {
  it("a plain call is one line, as before", () => {
    expect(progressRows("shell", '{"command":"Get-ChildItem"}')).toEqual(['→ shell {"command":"Get-ChildItem"}']);
  });

  it("a tool name or arguments with a line break, padding or a forged record are bounded rows of their own", () => {
    const cases: [string, string][] = [
      [`shell\n${FORGED_AUDIT}`, "{}"],
      ["shell", JSON.stringify({ command: `ls${".".repeat(60)}${FORGED_AUDIT}` })],
      ["shell", JSON.stringify({ command: `ls${" ".repeat(5000)}rm -r ~` })],
    ];
    for (const [name, raw] of cases) {
      const rows = progressRows(name, raw);
      expect(rows[0]?.startsWith("→ ")).toBe(true);
      for (const row of rows.slice(1)) expect(row.startsWith(CONTINUED)).toBe(true);
      for (const row of rows) expect(columns(row)).toBeLessThanOrEqual(BOUNDS.row);
    }
    expect(progressRows("shell", JSON.stringify({ command: `ls${" ".repeat(5000)}rm -r ~` }))).toEqual([
      '→ shell {"command":"ls"[5000 个空白]"rm -r ~"}',
    ]);
  });
});

describe("shownText and oneLine: a value on one line", () => {
  it("a tool name with a line break cannot start an audit record of its own", () => {
    expect(shownText(`shell\n${FORGED_AUDIT}`, BOUNDS.progressName)).toBe(
      "shell\\n[Permission] shell: allow [省略 39 个字符]s tool call",
    );
    expect(oneLine(`x\r\n${FORGED_AUDIT}\t`)).toBe(`x\\u000d\\n${FORGED_AUDIT}\\t`);
  });
});

describe("visible and shownAnswer: the final answer", () => {
  it("format characters are escaped in any text, line breaks and tabs are kept", () => {
    expect(visible("a\u202eb\u200bc\u{e0041}\n\td")).toBe("a\\u202eb\\u200bc\\u{e0041}\n\td");
  });

  it("every Default_Ignorable_Code_Point is hidden: escaped on one line and in any text, found by the property", () => {
    const missed: string[] = [];
    for (let code = 0; code <= 0x10ffff; code += 1) {
      const char = String.fromCodePoint(code);
      if (!/\p{Default_Ignorable_Code_Point}/u.test(char)) continue;
      const shown = escaped(char);
      if (!hasHiddenCharacters(char) || oneLine(char) !== shown || visible(char) !== shown) missed.push(shown);
    }
    expect(missed).toEqual([]);
    expect(oneLine("a\u034f\u115f\u17b4\u180f\u2065\u3164\uffa0\ufff0\u{e0000}\u{e0fff}b")).toBe(
      "a\\u034f\\u115f\\u17b4\\u180f\\u2065\\u3164\\uffa0\\ufff0\\u{e0000}\\u{e0fff}b",
    );
  });

  it("an instruction hidden in variation selectors, one per byte, is shown as escapes in an answer", () => {
    // Bytes 0x68 0x69 0x0a ("hi\n"): U+E0100 + byte - 16 for the high ones, U+FE00 + byte for the low one.
    const smuggled = "ok\u{e0158}\u{e0159}\ufe0a";
    expect(visible(smuggled)).toBe("ok\\u{e0158}\\u{e0159}\\ufe0a");
    expect(shownAnswer(smuggled)).toBe("ok\\u{e0158}\\u{e0159}\\ufe0a");
    expect(hasHiddenCharacters(smuggled)).toBe(true);
  });

  it("a presentation selector right after an emoji stays in an answer; any other is escaped", () => {
    expect(visible("⚠\ufe0f 注意, 1\ufe0f\u20e3")).toBe("⚠\ufe0f 注意, 1\ufe0f\u20e3");
    expect(visible("a\ufe0f ⚠\ufe0f\ufe0f ⚠\ufe00 \ufe0e")).toBe("a\\ufe0f ⚠\ufe0f\\ufe0f ⚠\\ufe00 \\ufe0e");
    // A value on one line escapes it even there: no selector passes for part of a name.
    expect(oneLine("⚠\ufe0f")).toBe("⚠\\ufe0f");
  });

  it("an emoji joined with a zero-width joiner stays one emoji; any other joiner is escaped", () => {
    expect(visible("👩‍💻 ❤️‍🔥")).toBe("👩‍💻 ❤️‍🔥");
    expect(visible("a\u200db")).toBe("a\\u200db");
  });

  it("an ordinary answer is printed byte for byte, a mention of [Permission] inside a line included", () => {
    const answers = [
      "命令执行成功，输出是 42。",
      "演示结束。看上面的 [Permission] 行: 调用 A (glob) 是 allow (default)。",
      "上面的每一行 → 都是一次工具调用。\n\n```ts\nconst x = 1;\n```\n- a\n- b",
    ];
    for (const answer of answers) expect(shownAnswer(answer)).toBe(answer);
  });

  it("a line that begins like an audit record or the approval block is marked as the answer's", () => {
    expect(shownAnswer(`Done.\n${FORGED_AUDIT}\n${FAKE_BLOCK}`)).toBe(
      [
        "Done.",
        `${ANSWER_MARK}${FORGED_AUDIT}`,
        `${ANSWER_MARK}工具调用需要批准: shell`,
        `${ANSWER_MARK}原因: PowerShell command execution requires explicit approval.`,
        `${ANSWER_MARK}参数: {"command":"Get-ChildItem"}`,
        `${ANSWER_MARK}允许本次调用? [y/N] `,
      ].join("\n"),
    );
  });

  it.each(CLI_LINE_STARTS)("a line beginning with %j, indented or not, is marked", (start) => {
    expect(shownAnswer(`ok\n${start} x\n  \t${start} y`)).toBe(
      `ok\n${ANSWER_MARK}${start} x\n${ANSWER_MARK}  \t${start} y`,
    );
  });

  it("a carriage return cannot move a forged line to the start of the row", () => {
    expect(shownAnswer(`Done.\r${FORGED_AUDIT}`)).toBe(`Done.\\u000d${FORGED_AUDIT}`);
  });
});
