import { fileURLToPath } from "node:url";
import { describe, expect, test, vi } from "vitest";
import * as bootstrap from "../src/bootstrap.js";
import { toolCall } from "../src/core/messages.js";
import { ToolRegistry, type ToolResult } from "../src/core/tools.js";
import * as todos from "../src/features/todos.js";
import {
  MAX_TODO_SNAPSHOT_BYTES,
  MAX_TODOS,
  STALE_TOOL_ROUNDS,
  TODO_STALE_REMINDER,
  TODO_STATUSES,
  TodoTracker,
  type TodoItem,
} from "../src/features/todos.js";
import { runProbe } from "./support/probe.js";

// The TODO domain on its own: the Zod contract, the whole-snapshot write, the ASCII result, the failure
// boundaries and the stale-round count. Every write goes through the registry's real prepare → invoke path.

const CONTEXT = Object.freeze({ workspace: "/unused", identity: "user" });

/** One `todo_write` call with `argumentsJson` as the model sent it: the handler's result, or the prepare error. */
async function invokeTodo(tracker: TodoTracker, argumentsJson: string): Promise<ToolResult> {
  const registry = new ToolRegistry();
  registry.register(tracker.toolDefinition);
  const prepared = registry.prepare(toolCall("todo-1", "todo_write", argumentsJson));
  if (prepared.error !== undefined) return prepared.error;
  return registry.invoke(prepared, CONTEXT);
}

/** The arguments of a write of `items`, as JSON text. */
const write = (...items: unknown[]): string => JSON.stringify({ todos: items });
const item = (content: string, status = "pending"): { content: string; status: string } => ({ content, status });
const INVALID = "Error [invalid_arguments]: Invalid arguments for todo_write: ";

/** The JSON Schema the model is offered for todo_write, key for key as z.toJSONSchema emits it. */
const TODO_WRITE_PARAMETERS = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: {
    todos: {
      maxItems: 50,
      type: "array",
      items: {
        type: "object",
        properties: {
          content: { type: "string", minLength: 1 },
          status: { type: "string", enum: ["pending", "in_progress", "completed"] },
        },
        required: ["content", "status"],
        additionalProperties: false,
      },
    },
  },
  required: ["todos"],
  additionalProperties: false,
};

describe("the input contract", () => {
  test("the book's constants: 50 items, 3 stale rounds, three frozen statuses, the reminder text", () => {
    expect(MAX_TODOS).toBe(50);
    expect(STALE_TOOL_ROUNDS).toBe(3);
    expect(TODO_STATUSES).toEqual(["pending", "in_progress", "completed"]);
    expect(Object.isFrozen(TODO_STATUSES)).toBe(true);
    expect(TODO_STALE_REMINDER).toBe(
      "Keep the TODO list current. Call todo_write with the complete task snapshot when the plan changes.",
    );
  });

  test("the tool's face: todo_write, its description, effect write, and the exact JSON Schema the model sees", () => {
    const tracker = new TodoTracker();
    const { name, description, effect } = tracker.toolDefinition;
    expect({ name, description, effect }).toEqual({
      name: "todo_write",
      description: "Replace the current TODO list with a complete task snapshot.",
      effect: "write",
    });
    expect(Object.isFrozen(tracker.toolDefinition)).toBe(true);
    const registry = new ToolRegistry();
    registry.register(tracker.toolDefinition);
    expect(JSON.stringify(registry.openAITools()[0]?.function.parameters)).toBe(JSON.stringify(TODO_WRITE_PARAMETERS));
  });

  test("the three statuses are accepted, and content is trimmed before it is checked and stored", async () => {
    const tracker = new TodoTracker();
    const result = await invokeTodo(
      tracker,
      write(item("  编写测试  ", "pending"), item("\tship\n", "in_progress"), item("done", "completed")),
    );
    expect(result.isError).toBe(false);
    expect(tracker.todos).toEqual([
      { content: "编写测试", status: "pending" },
      { content: "ship", status: "in_progress" },
      { content: "done", status: "completed" },
    ]);
  });

  test.each([
    ["three spaces", "   "],
    ["two ideographic spaces", "\u3000\u3000"],
    ["an empty string", ""],
  ])("content of %s fails after the trim with the book's message", async (_name, content) => {
    const result = await invokeTodo(new TodoTracker(), write(item(content)));
    expect(result).toEqual({
      content: `${INVALID}todos.0.content: todo content must not be empty`,
      isError: true,
      errorCode: "invalid_arguments",
    });
  });

  test("content of only U+200B is accepted: trim leaves it, and the result shows it as \\u200b", async () => {
    const tracker = new TodoTracker();
    const result = await invokeTodo(tracker, write(item("\u200b")));
    expect(result.content).toBe('{"todos":[{"content":"\\u200b","status":"pending"}]}');
    expect(tracker.todos).toEqual([{ content: "\u200b", status: "pending" }]);
  });

  test("exactly 50 items are accepted, in order", async () => {
    const tracker = new TodoTracker();
    const fifty = Array.from({ length: 50 }, (_, index) => item(`task ${index}`));
    const result = await invokeTodo(tracker, write(...fifty));
    expect(result.isError).toBe(false);
    expect(tracker.todos).toHaveLength(50);
    expect(tracker.todos.map((todo) => todo.content)).toEqual(fifty.map((todo) => todo.content));
  });
});

describe("a failed update changes nothing", () => {
  const fiftyOne = write(...Array.from({ length: 51 }, (_, index) => item(`task ${index}`)));
  test.each<[string, string, string]>([
    ["51 items", fiftyOne, `${INVALID}todos: Too big: expected array to have <=50 items`],
    ["todos not an array", '{"todos":"ship"}', `${INVALID}todos: Invalid input: expected array, received string`],
    ["todos missing", "{}", `${INVALID}todos: Invalid input: expected array, received undefined`],
    [
      "a content that is not a string",
      '{"todos":[{"content":7,"status":"pending"}]}',
      `${INVALID}todos.0.content: Invalid input: expected string, received number`,
    ],
    [
      "the unknown status working",
      write(item("错误更新", "working")),
      `${INVALID}todos.0.status: Invalid option: expected one of "pending"|"in_progress"|"completed"`,
    ],
    [
      "a status in capitals",
      write(item("a", "PENDING")),
      `${INVALID}todos.0.status: Invalid option: expected one of "pending"|"in_progress"|"completed"`,
    ],
    ["an unknown key in an item", write({ ...item("a"), id: 1 }), `${INVALID}todos.0: Unrecognized key: "id"`],
    ["an unknown key beside todos", '{"todos":[],"extra":true}', `${INVALID}(arguments): Unrecognized key: "extra"`],
    [
      "__proto__ in an item",
      '{"todos":[{"content":"a","status":"pending","__proto__":{"status":"completed"}}]}',
      `${INVALID}todos.0: Unrecognized key: "__proto__"`,
    ],
    [
      "arguments that are not JSON",
      '{"todos":[',
      "Error [invalid_json]: Arguments of todo_write must be a JSON object",
    ],
    ["a JSON array", "[]", "Error [invalid_json]: Arguments of todo_write must be a JSON object"],
  ])("%s: refused before the handler, and the old snapshot is the same object", async (_name, args, message) => {
    const tracker = new TodoTracker();
    await invokeTodo(tracker, write(item("保留这项", "in_progress")));
    const before = tracker.todos;
    const failed = await invokeTodo(tracker, args);
    expect(failed.isError).toBe(true);
    expect(failed.content).toBe(message);
    expect(tracker.todos).toBe(before);
    expect(tracker.todos).toEqual([{ content: "保留这项", status: "in_progress" }]);
  });

  test("one bad item among good ones: nothing of the update is kept", async () => {
    const tracker = new TodoTracker();
    await invokeTodo(tracker, write(item("a")));
    const before = tracker.todos;
    const failed = await invokeTodo(tracker, write(item("b", "completed"), item("c", "done"), item("d")));
    expect(failed.errorCode).toBe("invalid_arguments");
    expect(tracker.todos).toBe(before);
  });
});

describe("the whole snapshot, as stable ASCII JSON", () => {
  test("the book's example, byte for byte", async () => {
    const result = await invokeTodo(
      new TodoTracker(),
      '{"todos":[{"content":"  编写测试  ","status":"in_progress"},{"content":"ship","status":"completed"}]}',
    );
    expect(result).toEqual({
      content:
        '{"todos":[{"content":"\\u7f16\\u5199\\u6d4b\\u8bd5","status":"in_progress"},{"content":"ship","status":"completed"}]}',
      isError: false,
    });
  });

  test("three items, then one: exactly that one is left; an empty list empties it", async () => {
    const tracker = new TodoTracker();
    await invokeTodo(tracker, write(item("读取现有实现", "in_progress"), item("增加失败测试"), item("实现并验证修复")));
    const one = await invokeTodo(tracker, write(item("ship", "completed")));
    expect(one.content).toBe('{"todos":[{"content":"ship","status":"completed"}]}');
    expect(tracker.todos).toEqual([{ content: "ship", status: "completed" }]);
    const none = await invokeTodo(tracker, write());
    expect(none).toEqual({ content: '{"todos":[]}', isError: false });
    expect(tracker.todos).toEqual([]);
  });

  test("the result lists exactly the submitted items in their order, with content then status", async () => {
    const tracker = new TodoTracker();
    // Keys in the other order, duplicates and two items in progress: the book sets no rule against them.
    const result = await invokeTodo(
      tracker,
      '{"todos":[{"status":"completed","content":"b"},{"status":"in_progress","content":"a"},{"content":"a","status":"in_progress"}]}',
    );
    expect(result.content).toBe(
      '{"todos":[{"content":"b","status":"completed"},{"content":"a","status":"in_progress"},{"content":"a","status":"in_progress"}]}',
    );
  });

  test("every code point is ASCII: BMP characters become lowercase \\uXXXX, an emoji a surrogate pair, controls stay escaped", async () => {
    const tracker = new TodoTracker();
    const contents = ["编写测试", "😀 done", "\u001b[31mred", "\u202eevil", "line\u2028break", "É", "\ud800 lone"];
    const result = await invokeTodo(tracker, write(...contents.map((content) => item(content))));
    const units = Array.from({ length: result.content.length }, (_, index) => result.content.charCodeAt(index));
    expect(units.filter((unit) => unit > 0x7f)).toEqual([]);
    expect(result.content).toBe(
      "{" +
        '"todos":[' +
        '{"content":"\\u7f16\\u5199\\u6d4b\\u8bd5","status":"pending"},' +
        '{"content":"\\ud83d\\ude00 done","status":"pending"},' +
        '{"content":"\\u001b[31mred","status":"pending"},' +
        '{"content":"\\u202eevil","status":"pending"},' +
        '{"content":"line\\u2028break","status":"pending"},' +
        '{"content":"\\u00c9","status":"pending"},' +
        '{"content":"\\ud800 lone","status":"pending"}' +
        "]}",
    );
    // Decoded, it is the stored snapshot, keys in the order content, status.
    const decoded = JSON.parse(result.content) as { todos: TodoItem[] };
    expect(decoded).toEqual({ todos: tracker.todos });
    expect(decoded.todos.map((todo) => Object.keys(todo))).toEqual(contents.map(() => ["content", "status"]));
  });

  test("two equal snapshots give identical text, from two trackers or twice from one", async () => {
    const args = write(item("编写测试", "in_progress"), item("😀"));
    const [first, second] = [new TodoTracker(), new TodoTracker()];
    const a = await invokeTodo(first, args);
    const b = await invokeTodo(second, args);
    const c = await invokeTodo(first, args);
    expect(b.content).toBe(a.content);
    expect(c.content).toBe(a.content);
  });
});

describe("the result is bounded before it is built", () => {
  const TOO_LARGE = {
    content:
      "Error [todo_snapshot_limit]: The TODO list would make a result over 4096 bytes (its JSON in ASCII: a " +
      "character above U+007F takes 6 bytes, or 12), so it was not changed. Shorten the items and call todo_write " +
      "again with the whole list.",
    isError: true,
    errorCode: "todo_snapshot_limit",
  };
  /** Characters of framing one pending item's result adds to its content: `{"todos":[{"content":"` and the rest. */
  const FRAME = '{"todos":[{"content":"","status":"pending"}]}'.length;

  test("a result of exactly 4,096 bytes is returned; one byte more is refused with todo_snapshot_limit and the old list stays", async () => {
    expect(MAX_TODO_SNAPSHOT_BYTES).toBe(4_096);
    const tracker = new TodoTracker();
    const fits = await invokeTodo(tracker, write(item("a".repeat(4_096 - FRAME))));
    expect(fits.isError).toBe(false);
    expect(fits.content).toHaveLength(4_096);
    const before = tracker.todos;
    expect(await invokeTodo(tracker, write(item("a".repeat(4_097 - FRAME))))).toEqual(TOO_LARGE);
    expect(tracker.todos).toBe(before);
  });

  test("the bound counts the escaped result: 675 CJK characters fit and 676 do not, and so for emoji at 12 bytes", async () => {
    // 6 bytes each as \uXXXX: 45 + 6 × 675 = 4,095; 45 + 6 × 676 = 4,101.
    const tracker = new TodoTracker();
    const fits = await invokeTodo(tracker, write(item("编".repeat(675))));
    expect(fits.content).toHaveLength(4_095);
    expect(await invokeTodo(tracker, write(item("编".repeat(676))))).toEqual(TOO_LARGE);
    // An emoji is a surrogate pair, 12 bytes: 45 + 12 × 337 = 4,089 fits, one more is 4,101.
    expect((await invokeTodo(tracker, write(item("😀".repeat(337))))).content).toHaveLength(4_089);
    expect(await invokeTodo(tracker, write(item("😀".repeat(338))))).toEqual(TOO_LARGE);
    expect(tracker.todos[0]?.content).toBe("😀".repeat(337));
  });

  test("the whole list counts: 50 items of 60 ASCII characters are refused though each is small", async () => {
    const tracker = new TodoTracker();
    const result = await invokeTodo(tracker, write(...Array.from({ length: 50 }, () => item("x".repeat(60)))));
    expect(result).toEqual(TOO_LARGE);
    expect(tracker.todos).toEqual([]);
  });

  test("contents over 4,096 UTF-16 units together are refused unbuilt: no JSON of the list is made", async () => {
    const tracker = new TodoTracker();
    const args = write(item("a".repeat(2_048)), item("b".repeat(2_049)));
    const stringify = vi.spyOn(JSON, "stringify");
    try {
      expect(await invokeTodo(tracker, args)).toEqual(TOO_LARGE);
      const lists = stringify.mock.calls.filter(
        ([value]) => typeof value === "object" && value !== null && "todos" in value,
      );
      expect(lists).toEqual([]);
    } finally {
      stringify.mockRestore();
    }
    expect(tracker.todos).toEqual([]);
  });

  test("a refused list does not count as an update: the stale count goes on", async () => {
    const tracker = new TodoTracker();
    tracker.recordToolRound(["read_file"]);
    tracker.recordToolRound(["read_file"]);
    tracker.recordToolRound(["read_file"]);
    expect(await invokeTodo(tracker, write(item("a".repeat(30_000))))).toEqual(TOO_LARGE);
    expect(tracker.beforeModel()).toEqual([{ role: "system", content: TODO_STALE_REMINDER }]);
  });

  const probe = fileURLToPath(new URL("./support/todo-probe.ts", import.meta.url));
  const MiB = 1024 * 1024;
  test.each([
    ["CJK (3 bytes each, 6 as an escape)", "编"],
    ["ASCII", "a"],
  ])(
    "one 30 MB todo_write of %s through the loop peaks below 650 MiB in its own process, and is refused",
    (_name, character) => {
      const run = runProbe(probe, "write", "30", character);
      expect(run.maxRssBytes).toBeLessThan(650 * MiB);
      expect(run.summary).toEqual({ result: TOO_LARGE.content, resultLength: TOO_LARGE.content.length, todos: 0 });
    },
    120_000,
  );
});

describe("the snapshot belongs to its tracker and is frozen", () => {
  test("the first snapshot is a frozen empty array", () => {
    const tracker = new TodoTracker();
    expect(tracker.todos).toEqual([]);
    expect(Object.isFrozen(tracker.todos)).toBe(true);
  });

  test("after a write the array and each item are frozen, and an assignment throws TypeError", async () => {
    const tracker = new TodoTracker();
    await invokeTodo(tracker, write(item("a", "pending")));
    const snapshot = tracker.todos;
    expect(Object.isFrozen(snapshot)).toBe(true);
    expect(snapshot.every((todo) => Object.isFrozen(todo))).toBe(true);
    expect(() => {
      // @ts-expect-error readonly at compile time; Object.freeze holds it at run time too
      snapshot[0].status = "completed";
    }).toThrow(TypeError);
    expect(() => (snapshot as TodoItem[]).push(item("b") as TodoItem)).toThrow(TypeError);
    expect(tracker.todos[0]?.status).toBe("pending");
    // The same object until the next successful write.
    expect(tracker.todos).toBe(snapshot);
  });

  test("two trackers keep their own snapshots and counts", async () => {
    const [a, b] = [new TodoTracker(), new TodoTracker()];
    await invokeTodo(a, write(item("A 的计划")));
    a.recordToolRound(["read_file"]);
    a.recordToolRound(["read_file"]);
    expect(b.todos).toEqual([]);
    b.recordToolRound(["read_file"]);
    expect(b.beforeModel()).toEqual([]);
    a.recordToolRound(["glob"]);
    expect(a.beforeModel()).toHaveLength(1);
    expect(b.beforeModel()).toEqual([]);
    expect(a.todos).toEqual([{ content: "A 的计划", status: "pending" }]);
  });

  test("no module exports a tracker: bootstrap and the feature export classes and values, never an instance", () => {
    const exported = [...Object.values(todos), ...Object.values(bootstrap)];
    expect(exported.some((value) => value instanceof TodoTracker)).toBe(false);
  });
});

describe("the stale count, per tool round", () => {
  test("a round with no calls changes nothing; a round of three calls counts once", () => {
    const tracker = new TodoTracker();
    tracker.recordToolRound([]);
    tracker.recordToolRound(["read_file", "glob", "read_file"]);
    tracker.recordToolRound([]);
    tracker.recordToolRound(["shell"]);
    expect(tracker.beforeModel()).toEqual([]);
    tracker.recordToolRound(["read_file"]);
    expect(tracker.beforeModel()).toHaveLength(1);
  });

  test("the reminder comes once, after the third stale round, as one frozen system message; the count starts again", () => {
    const tracker = new TodoTracker();
    const reminders: number[] = [];
    for (let request = 1; request <= 10; request += 1) {
      const guidance = tracker.beforeModel();
      if (guidance.length > 0) {
        expect(guidance).toEqual([{ role: "system", content: TODO_STALE_REMINDER }]);
        expect(Object.isFrozen(guidance)).toBe(true);
        expect(Object.isFrozen(guidance[0])).toBe(true);
        reminders.push(request);
      }
      tracker.recordToolRound(["read_file"]);
    }
    expect(reminders).toEqual([4, 7, 10]);
    // Asked twice before the same request, it answers once.
    const fresh = new TodoTracker();
    for (const _ of [1, 2, 3]) fresh.recordToolRound(["glob"]);
    expect(fresh.beforeModel()).toHaveLength(1);
    expect(fresh.beforeModel()).toEqual([]);
  });

  test("a round that contains todo_write resets the count, shell + todo_write included", () => {
    const tracker = new TodoTracker();
    tracker.recordToolRound(["read_file"]);
    tracker.recordToolRound(["glob"]);
    tracker.recordToolRound(["shell", "todo_write"]);
    tracker.recordToolRound(["read_file"]);
    tracker.recordToolRound(["read_file"]);
    expect(tracker.beforeModel()).toEqual([]);
    tracker.recordToolRound(["read_file"]);
    expect(tracker.beforeModel()).toHaveLength(1);
  });

  test("a successful todo_write resets the count; a refused one leaves it, since its handler never ran", async () => {
    const tracker = new TodoTracker();
    tracker.recordToolRound(["read_file"]);
    tracker.recordToolRound(["read_file"]);
    await invokeTodo(tracker, write(item("a", "working")));
    tracker.recordToolRound(["read_file"]);
    expect(tracker.beforeModel()).toHaveLength(1);
    tracker.recordToolRound(["read_file"]);
    tracker.recordToolRound(["read_file"]);
    await invokeTodo(tracker, write(item("a")));
    tracker.recordToolRound(["read_file"]);
    expect(tracker.beforeModel()).toEqual([]);
  });
});
