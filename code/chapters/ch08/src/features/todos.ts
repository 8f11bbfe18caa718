import { z } from "zod";
import type { ToolRoundObserver } from "../core/loop.js";
import { systemMessage, type ChatMessage } from "../core/messages.js";
import { toolSuccess, type ToolDefinition, type ToolResult } from "../core/tools.js";

/** Items one `todo_write` may hold: the array bound is in the schema, so the model sees it too. */
export const MAX_TODOS = 50;
/** Tool rounds without `todo_write` after which the next request carries the reminder. */
export const STALE_TOOL_ROUNDS = 3;
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
 * escape (a surrogate pair above the BMP): one logical snapshot always gives the same ASCII text.
 */
function serializeSnapshot(todos: readonly TodoItem[]): string {
  const json = JSON.stringify({ todos: todos.map(({ content, status }) => ({ content, status })) });
  const escape = (unit: number): string => `\\u${unit.toString(16).padStart(4, "0")}`;
  let ascii = "";
  for (const character of json) {
    const codePoint = character.codePointAt(0);
    if (codePoint === undefined) throw new Error("todo snapshot contained an invalid Unicode value");
    if (codePoint <= 0x7f) {
      ascii += character;
    } else if (codePoint <= 0xffff) {
      ascii += escape(codePoint);
    } else {
      const above = codePoint - 0x10000;
      ascii += escape(0xd800 + (above >> 10)) + escape(0xdc00 + (above & 0x3ff));
    }
  }
  return ascii;
}

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

  /** Only validated input gets here, and it replaces the list in one assignment: no merge, no half update. */
  #writeTodos(input: TodoWriteInput): ToolResult {
    this.#todos = Object.freeze(input.todos.map(({ content, status }) => Object.freeze({ content, status })));
    this.#nonTodoToolRounds = 0;
    return toolSuccess(serializeSnapshot(this.#todos));
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
