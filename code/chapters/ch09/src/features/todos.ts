import { z } from "zod";
import type { ToolRoundObserver } from "../core/loop.js";
import { systemMessage, type ChatMessage } from "../core/messages.js";
import { toolError, toolSuccess, type ToolDefinition, type ToolResult } from "../core/tools.js";

/** Items one `todo_write` may hold: the array bound is in the schema, so the model sees it too. */
export const MAX_TODOS = 50;
/** Tool rounds without `todo_write` after which the next request carries the reminder. */
export const STALE_TOOL_ROUNDS = 3;
/**
 * Bytes a `todo_write` result may take (ours; the book's schema has no bound on `content`, and the model sees that
 * schema verbatim). The result is the model's own text, so chapter 8 must never save it to a file unasked: 4,096 is
 * under its 30,000-byte threshold, and 32 such results with the refused calls of a 256-call reply stay under its
 * 200,000-byte budget for one reply. A 30 MB `content` is refused before any of its snapshot is built.
 */
export const MAX_TODO_SNAPSHOT_BYTES = 4_096;
export const TODO_STATUSES = Object.freeze(["pending", "in_progress", "completed"] as const);

export type TodoStatus = (typeof TODO_STATUSES)[number];

const todoItemSchema = z
  .object({
    // Trimmed first, then checked: "   " must fail, which min(1) on the raw text would let through.
    content: z
      .string()
      .transform((content) => content.trim())
      .pipe(z.string().min(1, "todo content must not be empty")),
    status: z.enum(TODO_STATUSES),
  })
  .strict();

const todoWriteSchema = z.object({ todos: z.array(todoItemSchema).max(MAX_TODOS) }).strict();

export type TodoItem = Readonly<z.output<typeof todoItemSchema>>;
type TodoWriteInput = z.output<typeof todoWriteSchema>;

/** Goes at the end of one request, never into the history. */
export const TODO_STALE_REMINDER =
  "Keep the TODO list current. Call todo_write with the complete task snapshot when the plan changes.";

/**
 * The whole list as JSON in a fixed field order, with every code point above 0x7f written as a `\uXXXX`
 * escape (a surrogate pair above the BMP): one logical snapshot always gives the same ASCII text. One pass over
 * the UTF-16 units: a character above the BMP is two of them, so it becomes its pair.
 */
function serializeSnapshot(todos: readonly TodoItem[]): string {
  const json = JSON.stringify({ todos: todos.map(({ content, status }) => ({ content, status })) });
  return json.replace(/[\u0080-\uffff]/g, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/**
 * The snapshot's result, or `undefined` when it would be over `MAX_TODO_SNAPSHOT_BYTES`. Every UTF-16 unit of a
 * content is at least one byte of the result, so contents longer than the bound together are refused unbuilt.
 */
function boundedSnapshot(todos: readonly TodoItem[]): string | undefined {
  let units = 0;
  for (const { content } of todos) units += content.length;
  if (units > MAX_TODO_SNAPSHOT_BYTES) return undefined;
  const text = serializeSnapshot(todos);
  return text.length > MAX_TODO_SNAPSHOT_BYTES ? undefined : text;
}

const SNAPSHOT_TOO_LARGE = toolError(
  "todo_snapshot_limit",
  `The TODO list would make a result over ${MAX_TODO_SNAPSHOT_BYTES} bytes (its JSON in ASCII: a character above ` +
    "U+007F takes 6 bytes, or 12), so it was not changed. Shorten the items and call todo_write again with the whole list.",
);

/**
 * One session's TODO list and how many tool rounds have passed without an update. The same object is the
 * `todo_write` tool and the loop's round observer; `buildAgent` makes one per agent, so sessions never share.
 */
export class TodoTracker implements ToolRoundObserver {
  #todos: readonly TodoItem[] = Object.freeze([]);
  #nonTodoToolRounds = 0;
  readonly toolDefinition: ToolDefinition<TodoWriteInput>;

  constructor() {
    this.toolDefinition = Object.freeze({
      name: "todo_write",
      description: "Replace the current TODO list with a complete task snapshot.",
      inputSchema: todoWriteSchema,
      // It changes session state, not the disk: the policy's file rule matches names, so nobody is asked.
      effect: "write",
      // Our registry awaits every handler; the write itself is synchronous, as the book shows it.
      handler: (input: TodoWriteInput) => Promise.resolve(this.#writeTodos(input)),
    });
  }

  /** The last snapshot written, the same frozen array until the next valid `todo_write`. */
  get todos(): readonly TodoItem[] {
    return this.#todos;
  }

  /**
   * Only validated input gets here, and it replaces the list in one assignment: no merge, no half update. A list
   * whose result would be too large changes nothing.
   */
  #writeTodos(input: TodoWriteInput): ToolResult {
    const todos = Object.freeze(input.todos.map(({ content, status }) => Object.freeze({ content, status })));
    const snapshot = boundedSnapshot(todos);
    if (snapshot === undefined) return SNAPSHOT_TOO_LARGE;
    this.#todos = todos;
    this.#nonTodoToolRounds = 0;
    return toolSuccess(snapshot);
  }

  /** One assistant message's calls count once, whatever their number; any `todo_write` among them resets. */
  recordToolRound(toolNames: readonly string[]): void {
    if (toolNames.length === 0) return;
    if (toolNames.includes(this.toolDefinition.name)) {
      this.#nonTodoToolRounds = 0;
      return;
    }
    this.#nonTodoToolRounds += 1;
  }

  /** The reminder, once, in the request after the third stale round; the count starts again from there. */
  beforeModel(): readonly ChatMessage[] {
    if (this.#nonTodoToolRounds < STALE_TOOL_ROUNDS) return [];
    this.#nonTodoToolRounds = 0;
    return Object.freeze([systemMessage(TODO_STALE_REMINDER)]);
  }
}
