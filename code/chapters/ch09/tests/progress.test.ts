import { afterEach, describe, expect, it, vi } from "vitest";
import { toolCall } from "../src/core/messages.js";
import { modelTextRows, MODEL_TEXT_ROWS, progressListener, resultPreview } from "../src/cli/progress.js";
import { Terminal } from "../src/cli/terminal.js";
import { ANSWER_MARK, columns } from "../src/cli/visible.js";
import { toolError, toolSuccess } from "../src/core/tools.js";
import { Sink } from "./support/sink.js";

// What a real run shows while it runs (the readers' round): a result's first line beside `✓ ok`, the model's words
// beside its calls before they run, and on a terminal how long the running call has taken.

afterEach(() => {
  vi.useRealTimers();
});

describe("resultPreview", () => {
  it("is the first line that is not blank, trimmed: chapter 1's reader sees the 42 the book shows", () => {
    expect(resultPreview("42\n")).toBe("42");
    expect(resultPreview("\n\n   first  \nsecond\n")).toBe("first …");
    expect(resultPreview("")).toBe("");
    expect(resultPreview(" \n\t\n")).toBe("");
  });

  it("escapes what a terminal would obey and cuts a long line to 56 columns", () => {
    expect(resultPreview("\u001b[2Jgone")).toBe("\\u001b[2Jgone");
    expect(resultPreview("a\u202eb")).toBe("a\\u202eb");
    const long = resultPreview("x".repeat(5000));
    expect(long.endsWith(" …")).toBe(true);
    expect(long).toMatch(/^x+\[省略 \d+ 个字符\]x+ …$/);
    expect(columns(long.replace(/ …$/, ""))).toBeLessThanOrEqual(56);
  });

  it("reads at most the first 4,096 code units of a result", () => {
    expect(resultPreview(`${" ".repeat(4096)}hidden`)).toBe("");
  });
});

describe("modelTextRows", () => {
  it("marks a line that begins like one of the CLI's own, as the answer does", () => {
    expect(modelTextRows("先看看文件。\n[Permission] shell: allow (user) - fake")).toEqual([
      "先看看文件。",
      `${ANSWER_MARK}[Permission] shell: allow (user) - fake`,
    ]);
  });

  it("shows at most 12 rows and counts the rest", () => {
    const rows = modelTextRows(Array.from({ length: 20 }, (_, index) => `line ${index}`).join("\n"));
    expect(rows).toHaveLength(MODEL_TEXT_ROWS + 1);
    expect(rows.at(-1)).toBe("(还有 8 行未显示)");
  });

  it("reads at most 4,000 code units, and counts the rest of the rows it made", () => {
    const rows = modelTextRows("y".repeat(100_000));
    // 4,000 columns: a first row of 79, then rows of 73 after `    | `, 55 rows in all: 12 shown.
    expect(rows).toHaveLength(MODEL_TEXT_ROWS + 1);
    expect(rows.at(-1)).toBe("(还有 43 行未显示)");
    // The first 4,000 code units only: a line of 5 and a line of 3,994 (55 rows).
    expect(modelTextRows(`short\n${"z".repeat(5000)}`).at(-1)).toBe("(还有 44 行未显示)");
    // Fewer rows than the bound, but more text than was read: said without a count.
    expect(modelTextRows(`${"b".repeat(600)}${" ".repeat(4000)}x`).at(-1)).toBe("(后面还有, 未显示)");
  });

  it("bounds screen rows, not lines: one line of 4,000 wide characters is 12 rows of at most 79 columns", () => {
    const rows = modelTextRows("好".repeat(4000));
    expect(rows).toHaveLength(MODEL_TEXT_ROWS + 1);
    expect(rows.slice(0, -1).every((row) => columns(row) <= 79)).toBe(true);
  });

  it("shows tabs and characters that draw nothing as escapes, so a row is as wide as it measures", () => {
    // A terminal moves a tab up to 8 columns: ten of them would push the rest onto a row of its own.
    const tabbed = modelTextRows(`ok:${"\t".repeat(10)}x[Permission] shell: allow (terminal-approval)`);
    expect(tabbed[0]).toBe(`ok:${"\\t".repeat(10)}x[Permission] shell: allow (terminal-approval)`);
    expect(tabbed.every((row) => columns(row) <= 79)).toBe(true);
    for (const forged of ["[Per\u034fmission] allow", "\u2713\ufe0e ok", "原因\ufe00: x", "[Permission\u{e0100}]"]) {
      expect(modelTextRows(forged)[0]).toMatch(/\\u\{?[0-9a-f]+\}?/);
    }
  });

  it("puts the lead in front of every row and counts it in the row's width", () => {
    const rows = modelTextRows(`${"x".repeat(71)}原因: ok`, "子 Agent ");
    expect(rows.length).toBe(2);
    expect(rows[0]?.startsWith("子 Agent x")).toBe(true);
    expect(rows[1]?.startsWith("    | ")).toBe(true);
    expect(rows.every((row) => columns(row) <= 79)).toBe(true);
  });

  it("cuts a line the terminal could wrap into a CLI line into rows of its own", () => {
    const rows = modelTextRows(`${"字".repeat(40)}[Permission] shell: allow`);
    expect(rows.length).toBeGreaterThan(1);
    expect(rows.slice(1).every((row) => row.startsWith("    | "))).toBe(true);
  });
});

describe("progressListener", () => {
  const call = toolCall("c1", "shell", '{"command":"Write-Output 42"}');

  it("prints the preview beside ✓ ok, and errors as before", () => {
    const sink = new Sink();
    const listen = progressListener(new Terminal(sink, { interactive: false, color: false }));
    listen({ type: "tool_call", call });
    listen({ type: "tool_result", call, result: toolSuccess("42\n") });
    listen({ type: "tool_result", call, result: toolSuccess("") });
    listen({ type: "tool_result", call, result: toolError("permission_denied", "no") });
    listen({ type: "tool_result", call, result: toolError("shell_timeout", "slow") });
    expect(sink.text).toBe(
      '→ shell {"command":"Write-Output 42"}\n  ✓ ok  42\n  ✓ ok\n  ✗ denied\n  ✗ shell_timeout\n',
    );
  });

  it("on a terminal, shows a call's seconds once it has run one, under every line until its result, and not while a question waits", () => {
    vi.useFakeTimers({ now: 0 });
    const sink = new Sink();
    const terminal = new Terminal(sink, { interactive: true, color: false });
    const listen = progressListener(terminal);
    listen({ type: "tool_call", call });
    // Most calls end within a second: they draw nothing.
    vi.advanceTimersByTime(960);
    expect(sink.text).toBe('→ shell {"command":"Write-Output 42"}\n');
    // The spinner redraws every 80 ms: 3,040 ms is its first frame past three seconds.
    vi.advanceTimersByTime(2_080);
    expect(sink.text).toContain("运行中: shell (3 秒)…");
    terminal.prompt("允许本次调用? [y/N] ");
    const asked = sink.text.length;
    vi.advanceTimersByTime(2_000);
    expect(sink.text.length).toBe(asked);
    terminal.resume();
    // The two seconds the question waited are not the call's: it counts again from the answer.
    vi.advanceTimersByTime(960);
    expect(sink.text.slice(asked)).toBe("");
    vi.advanceTimersByTime(80);
    expect(sink.text.slice(asked)).toContain("运行中: shell (1 秒)…");
    listen({ type: "tool_result", call, result: toolSuccess("42") });
    const done = sink.text.length;
    vi.advanceTimersByTime(2_000);
    expect(sink.text.length).toBe(done);
    expect(sink.text.endsWith("  ✓ ok  42\n")).toBe(true);
  });

  it("draws no status while a question waits, whoever asks for one", () => {
    const sink = new Sink();
    const terminal = new Terminal(sink, { interactive: true, color: false });
    terminal.prompt("允许本次调用? [y/N] ");
    terminal.status("等待模型回复 (第 2 轮)…");
    expect(sink.text).toBe("允许本次调用? [y/N] ");
  });

  it("idle() ends the status for good: a line after it draws none", () => {
    vi.useFakeTimers({ now: 0 });
    const sink = new Sink();
    const terminal = new Terminal(sink, { interactive: true, color: false });
    terminal.busy("运行中: shell");
    vi.advanceTimersByTime(2_000);
    terminal.idle();
    terminal.line("已中断，正在停止本次运行启动的所有命令。");
    const end = sink.text.length;
    vi.advanceTimersByTime(2_000);
    expect(sink.text.length).toBe(end);
    expect(sink.text.endsWith("已中断，正在停止本次运行启动的所有命令。\n")).toBe(true);
  });

  it("draws nothing but lines without a terminal, however long a call runs", () => {
    vi.useFakeTimers({ now: 0 });
    const sink = new Sink();
    const listen = progressListener(new Terminal(sink, { interactive: false, color: false }));
    listen({ type: "tool_call", call });
    vi.advanceTimersByTime(10_000);
    expect(sink.text).toBe('→ shell {"command":"Write-Output 42"}\n');
  });
});
