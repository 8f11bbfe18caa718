import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { AgentEvent } from "../src/core/agent-events.js";
import { HookRegistry, HookResult } from "../src/core/hooks.js";
import {
  AgentLimitError,
  AgentRunError,
  AgentRunner,
  HistoryProcessingError,
  HookRunError,
  IncompleteModelReplyError,
  MAX_TURN_RESULT_BYTES,
  type ToolRoundObserver,
  type TurnLifecycle,
  TurnLifecycleRefusal,
} from "../src/core/loop.js";
import {
  assistantMessage,
  type ChatMessage,
  MessageContractError,
  systemMessage,
  toolMessage,
  userMessage,
  validateToolPairing,
} from "../src/core/messages.js";
import { ToolRegistry, toolError, type ToolResult, toolSuccess } from "../src/core/tools.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";

// Chapter 8's two seams in the loop, through AgentRunner with processors written here: when each runs, what it
// sees, what becomes of its output, and what a broken one costs (CH08.md §1.6, rules 7–9, 31, 32, D6–D8, D19).

const PROCESSING_FAILED = "Error [tool_result_processing_error]: Tool result processing failed";
const PROCESSING_FAILED_RESULT = {
  content: PROCESSING_FAILED,
  isError: true,
  errorCode: "tool_result_processing_error",
};
const STOPPED = "Error [hook_stopped_continuation]: Skipped after PostToolUse requested a stop";
const SYSTEM_PROMPT = "You are a test agent.";
const MiB = 1024 * 1024;

function resultLimit(bytes: number, left: number): string {
  return (
    "Error [turn_result_limit]: The tool results of one reply may total at most 16777216 bytes; " +
    `this ${bytes}-byte result did not fit in the ${left} bytes left and was dropped after the call finished. ` +
    "Ask for less output, or call again in the next turn."
  );
}

/** `echo` answers its text, `fail` an error with code `echo_failed`, `emit` `char` repeated `repeat` times. */
function testTools(runs: string[] = []): ToolRegistry {
  const tools = new ToolRegistry();
  tools.register({
    name: "echo",
    description: "answers its text",
    inputSchema: z.strictObject({ text: z.string() }),
    effect: "read",
    handler: ({ text }) => {
      runs.push(`echo ${text}`);
      return Promise.resolve(toolSuccess(text));
    },
  });
  tools.register({
    name: "fail",
    description: "fails",
    inputSchema: z.strictObject({}),
    effect: "read",
    handler: () => {
      runs.push("fail");
      return Promise.resolve(toolError("echo_failed", "it failed"));
    },
  });
  tools.register({
    name: "emit",
    description: "emits text of a given size",
    inputSchema: z.strictObject({ char: z.string(), repeat: z.number().int() }),
    effect: "read",
    handler: ({ char, repeat }) => {
      runs.push(`emit ${repeat}`);
      return Promise.resolve(toolSuccess(char.repeat(repeat)));
    },
  });
  return tools;
}

const echo = (id: string, text: string) => call(id, "echo", { text });

/** What the tool result processor saw, each time it ran. */
interface SeenBatch {
  readonly results: readonly ToolResult[];
  readonly frozen: boolean;
  /** PostToolUse calls made in the whole run up to that moment. */
  readonly postCount: number;
  /** The tool messages of `runner.history` at that moment, as `[id, content]`. */
  readonly toolMessagesInHistory: [string, string][];
}

/** A runner with the test tools, a PostToolUse counter recording what each Post saw, and every event kept. */
function setUp(
  model: ScriptedModel,
  options: {
    toolResultProcessor?: (
      results: readonly ToolResult[],
      runner: AgentRunner,
      postSaw: readonly [string, string][],
    ) => Promise<readonly ToolResult[]>;
    /** The history processor's `prepare`. */
    historyProcessor?: (history: readonly ChatMessage[]) => Promise<readonly ChatMessage[]>;
    toolRoundObserver?: ToolRoundObserver;
    stopAfter?: string;
  } = {},
) {
  const events: AgentEvent[] = [];
  const postSaw: [string, string][] = [];
  const runs: string[] = [];
  const hooks = new HookRegistry();
  hooks.register("PostToolUse", (context) => {
    const id = context.prepared?.call.id ?? "?";
    postSaw.push([id, context.result?.content ?? "?"]);
    return new HookResult(id === options.stopAfter ? { preventContinuation: true } : {});
  });
  const processor = options.toolResultProcessor;
  const runner: AgentRunner = new AgentRunner({
    model,
    tools: testTools(runs),
    systemPrompt: SYSTEM_PROMPT,
    workspace: "/nowhere",
    hooks,
    onEvent: (event) => events.push(event),
    historyProcessor: options.historyProcessor === undefined ? undefined : { prepare: options.historyProcessor },
    toolRoundObserver: options.toolRoundObserver,
    toolResultProcessor: processor === undefined ? undefined : (results) => processor(results, runner, postSaw),
  });
  return { runner, events, postSaw, runs };
}

/** A processor that records each batch and answers `processed:<content>` for every result, keeping its error fields. */
function recordingProcessor(seen: SeenBatch[]) {
  return (
    results: readonly ToolResult[],
    runner: AgentRunner,
    postSaw: readonly [string, string][],
  ): Promise<readonly ToolResult[]> => {
    seen.push({
      results: [...results],
      frozen: Object.isFrozen(results),
      postCount: postSaw.length,
      toolMessagesInHistory: toolMessages(runner.history),
    });
    return Promise.resolve(results.map((result) => ({ ...result, content: `processed:${result.content}` })));
  };
}

/** Events as short rows: `model_request 1`, `tool_call c1`, `tool_result c1 <content>`. */
function rows(events: readonly AgentEvent[]): string[] {
  return events.map((event) => {
    if (event.type === "model_request") return `model_request ${event.turn}`;
    if (event.type === "tool_call") return `tool_call ${event.call.id}`;
    return `tool_result ${event.call.id} ${event.result.content}`;
  });
}

function toolResultEvents(events: readonly AgentEvent[]): [string, ToolResult][] {
  return events.flatMap((event): [string, ToolResult][] =>
    event.type === "tool_result" ? [[event.call.id, event.result]] : [],
  );
}

// ——— The book's seven cases of this file (it prints the title of the three-variant one); then this repository's. ———

describe("the book's loop processor cases", () => {
  it.each([
    ["throws", () => Promise.reject(new Error("disk full"))],
    ["returns the wrong number of results", (results: readonly ToolResult[]) => Promise.resolve(results.slice(1))],
    [
      "returns an invalid result",
      (results: readonly ToolResult[]) => Promise.resolve([results[0], { content: 3, isError: false }]),
    ],
  ] as const)("pairs every call with a controlled error when the processor %s", async (_name, processor) => {
    const model = new ScriptedModel([toolTurn(echo("c1", "a"), call("c2", "fail", {})), textTurn("done")]);
    const { runner } = setUp(model, {
      toolResultProcessor: (results) => processor(results) as Promise<readonly ToolResult[]>,
    });
    const result = await runner.run("go");
    expect(toolMessages(result.history)).toEqual([
      ["c1", PROCESSING_FAILED],
      ["c2", PROCESSING_FAILED],
    ]);
    validateToolPairing(result.history);
    expect(result.finalText).toBe("done");
  });

  it("hands the whole batch to the processor before any of its results is written back", async () => {
    const model = new ScriptedModel([toolTurn(echo("c1", "a"), echo("c2", "b")), textTurn("done")]);
    const seen: SeenBatch[] = [];
    const { runner } = setUp(model, { toolResultProcessor: recordingProcessor(seen) });
    const result = await runner.run("go");
    expect(seen.map((batch) => [batch.results.length, batch.toolMessagesInHistory])).toEqual([[2, []]]);
    expect(toolMessages(result.history)).toEqual([
      ["c1", "processed:a"],
      ["c2", "processed:b"],
    ]);
  });

  it("a PostToolUse stop returns the processed result", async () => {
    const model = new ScriptedModel([toolTurn(echo("c1", "a"))]);
    const { runner } = setUp(model, { toolResultProcessor: recordingProcessor([]), stopAfter: "c1" });
    const result = await runner.run("go");
    expect(result.finalText).toBe("processed:a");
    expect(toolMessages(result.history)).toEqual([["c1", "processed:a"]]);
  });

  it("the history processor's output goes into the request, never into the canonical history", async () => {
    const model = new ScriptedModel([textTurn("done")]);
    const { runner } = setUp(model, {
      historyProcessor: () => Promise.resolve([systemMessage("prepared request history")]),
    });
    const result = await runner.run("go");
    expect(model.requests[0]?.messages).toEqual([
      systemMessage(SYSTEM_PROMPT),
      systemMessage("prepared request history"),
    ]);
    expect(result.history).toEqual([userMessage("go"), assistantMessage("done")]);
  });

  it("an orphan history from the history processor fails before the model is called", async () => {
    const model = new ScriptedModel([textTurn("never asked")]);
    const { runner } = setUp(model, { historyProcessor: () => Promise.resolve([toolMessage("orphan", "missing")]) });
    await expect(runner.run("go")).rejects.toThrow(HistoryProcessingError);
    expect(model.requests).toEqual([]);
    expect(runner.history).toEqual([userMessage("go")]);
  });
});

describe("rules 7 and 8: the tool result processor sees each reply's whole batch, once, at the right moment", () => {
  it("runs once per assistant message with tool calls, after every PostToolUse of it and before any of its tool messages is in the history", async () => {
    const model = new ScriptedModel([
      toolTurn(echo("c1", "a"), echo("c2", "b"), echo("c3", "c")),
      toolTurn(echo("c4", "d")),
      textTurn("done"),
    ]);
    const seen: SeenBatch[] = [];
    const { runner, postSaw } = setUp(model, { toolResultProcessor: recordingProcessor(seen) });

    const result = await runner.run("go");

    expect(seen.map((batch) => batch.postCount)).toEqual([3, 4]);
    expect(seen.map((batch) => batch.toolMessagesInHistory)).toEqual([
      [],
      [
        ["c1", "processed:a"],
        ["c2", "processed:b"],
        ["c3", "processed:c"],
      ],
    ]);
    expect(seen.map((batch) => batch.results)).toEqual([
      [toolSuccess("a"), toolSuccess("b"), toolSuccess("c")],
      [toolSuccess("d")],
    ]);
    expect(seen.map((batch) => batch.frozen)).toEqual([true, true]);
    // PostToolUse saw each output as the handler returned it, never the processed one.
    expect(postSaw).toEqual([
      ["c1", "a"],
      ["c2", "b"],
      ["c3", "c"],
      ["c4", "d"],
    ]);
    expect(result.finalText).toBe("done");
    model.assertExhausted();
  });

  it("is never called for a text reply", async () => {
    const model = new ScriptedModel([textTurn("just text")]);
    const seen: SeenBatch[] = [];
    const { runner, runs } = setUp(model, { toolResultProcessor: recordingProcessor(seen) });

    const result = await runner.run("go");

    expect(seen).toHaveLength(0);
    expect(runs).toEqual([]);
    expect(result).toEqual({
      finalText: "just text",
      history: [userMessage("go"), assistantMessage("just text")],
      turns: 1,
    });
  });

  it("the history keeps the model's ids in call order with the processed contents, paired, and the next request carries them", async () => {
    const model = new ScriptedModel([
      toolTurn(echo("zeta", "1"), call("alpha", "fail", {}), echo("mid", "3")),
      textTurn("done"),
    ]);
    const seen: SeenBatch[] = [];
    const { runner } = setUp(model, { toolResultProcessor: recordingProcessor(seen) });

    const result = await runner.run("go");

    expect(toolMessages(result.history)).toEqual([
      ["zeta", "processed:1"],
      ["alpha", "processed:Error [echo_failed]: it failed"],
      ["mid", "processed:3"],
    ]);
    expect(() => validateToolPairing(result.history)).not.toThrow();
    expect(result.history).toEqual([
      userMessage("go"),
      assistantMessage(null, [echo("zeta", "1"), call("alpha", "fail", {}), echo("mid", "3")]),
      toolMessage("processed:1", "zeta"),
      toolMessage("processed:Error [echo_failed]: it failed", "alpha"),
      toolMessage("processed:3", "mid"),
      assistantMessage("done"),
    ]);
    expect(model.requests[1]?.messages.slice(3, 6)).toEqual(result.history.slice(2, 5));
  });

  it("the processed results, error fields included, are what the tool_result events carry", async () => {
    const model = new ScriptedModel([toolTurn(echo("c1", "a"), call("c2", "fail", {})), textTurn("done")]);
    const { runner, events } = setUp(model, {
      toolResultProcessor: (results) =>
        Promise.resolve(results.map((r, i) => (i === 0 ? toolSuccess("short a") : toolError("shrunk", r.content)))),
    });

    const result = await runner.run("go");

    expect(toolResultEvents(events)).toEqual([
      ["c1", { content: "short a", isError: false }],
      ["c2", { content: "Error [shrunk]: Error [echo_failed]: it failed", isError: true, errorCode: "shrunk" }],
    ]);
    expect(toolMessages(result.history)).toEqual([
      ["c1", "short a"],
      ["c2", "Error [shrunk]: Error [echo_failed]: it failed"],
    ]);
  });
});

describe("D7: tool_result events carry the final results", () => {
  it("with a processor every tool_result of a reply comes after its last tool_call, in call order", async () => {
    const model = new ScriptedModel([
      toolTurn(echo("c1", "a"), echo("c2", "b"), echo("c3", "c")),
      toolTurn(echo("c4", "d")),
      textTurn("done"),
    ]);
    const { runner, events } = setUp(model, { toolResultProcessor: recordingProcessor([]) });

    await runner.run("go");

    expect(rows(events)).toEqual([
      "model_request 1",
      "tool_call c1",
      "tool_call c2",
      "tool_call c3",
      "tool_result c1 processed:a",
      "tool_result c2 processed:b",
      "tool_result c3 processed:c",
      "model_request 2",
      "tool_call c4",
      "tool_result c4 processed:d",
      "model_request 3",
    ]);
  });

  it("rule 32: without processors events interleave and the history is the loop's own, exactly as before chapter 8", async () => {
    const model = new ScriptedModel([
      toolTurn(echo("c1", "a"), echo("c2", "b"), echo("c3", "c")),
      toolTurn(echo("c4", "d")),
      textTurn("done"),
    ]);
    const { runner, events } = setUp(model);

    const result = await runner.run("go");

    expect(rows(events)).toEqual([
      "model_request 1",
      "tool_call c1",
      "tool_result c1 a",
      "tool_call c2",
      "tool_result c2 b",
      "tool_call c3",
      "tool_result c3 c",
      "model_request 2",
      "tool_call c4",
      "tool_result c4 d",
      "model_request 3",
    ]);
    expect(toolResultEvents(events).map(([, r]) => r)).toEqual(["a", "b", "c", "d"].map(toolSuccess));
    expect(result).toEqual({
      finalText: "done",
      history: [
        userMessage("go"),
        assistantMessage(null, [echo("c1", "a"), echo("c2", "b"), echo("c3", "c")]),
        toolMessage("a", "c1"),
        toolMessage("b", "c2"),
        toolMessage("c", "c3"),
        assistantMessage(null, [echo("c4", "d")]),
        toolMessage("d", "c4"),
        assistantMessage("done"),
      ],
      turns: 3,
    });
    expect(model.requests.map((request) => request.messages)).toEqual([
      [systemMessage(SYSTEM_PROMPT), ...result.history.slice(0, 1)],
      [systemMessage(SYSTEM_PROMPT), ...result.history.slice(0, 5)],
      [systemMessage(SYSTEM_PROMPT), ...result.history.slice(0, 7)],
    ]);
  });

  it("rule 32: identity processors change no request and no history, only when the tool_result rows appear", async () => {
    const script = () =>
      new ScriptedModel([toolTurn(echo("c1", "a"), call("c2", "fail", {})), toolTurn(echo("c3", "c")), textTurn("ok")]);
    const plainModel = script();
    const plain = setUp(plainModel);
    const processedModel = script();
    const processed = setUp(processedModel, {
      toolResultProcessor: (results) => Promise.resolve(results),
      historyProcessor: (history) => Promise.resolve(history),
    });

    const plainResult = await plain.runner.run("go");
    const processedResult = await processed.runner.run("go");

    expect(processedResult).toEqual(plainResult);
    expect(processedModel.requests).toEqual(plainModel.requests);
    expect(processed.postSaw).toEqual(plain.postSaw);
    expect(toolResultEvents(processed.events)).toEqual(toolResultEvents(plain.events));
    expect(rows(plain.events)).toEqual([
      "model_request 1",
      "tool_call c1",
      "tool_result c1 a",
      "tool_call c2",
      "tool_result c2 Error [echo_failed]: it failed",
      "model_request 2",
      "tool_call c3",
      "tool_result c3 c",
      "model_request 3",
    ]);
  });
});

describe("rule 9: a broken processor turns the whole batch into one stable error", () => {
  const broken: [string, (results: readonly ToolResult[]) => Promise<unknown>][] = [
    ["a throw", () => Promise.reject(new Error("disk full"))],
    [
      "a synchronous throw",
      () => {
        throw new Error("boom");
      },
    ],
    ["a shorter array", (results) => Promise.resolve(results.slice(1))],
    ["an empty array", () => Promise.resolve([])],
    ["a longer array", (results) => Promise.resolve([...results, toolSuccess("extra")])],
    [
      "an array-like object",
      (results) => Promise.resolve({ ...Object.fromEntries(results.entries()), length: results.length }),
    ],
    ["undefined", () => Promise.resolve(undefined)],
    ["a string", () => Promise.resolve("processed")],
    ["an item without content", (results) => Promise.resolve([results[0], { isError: false }, results[2]])],
    [
      "an item whose content is no string",
      (results) => Promise.resolve([results[0], results[1], { content: 3, isError: false }]),
    ],
    [
      "an error item without errorCode",
      (results) => Promise.resolve([{ content: "x", isError: true }, results[1], results[2]]),
    ],
    ["a null item", (results) => Promise.resolve([results[0], null, results[2]])],
  ];

  it.each(broken)(
    "%s: every call of the batch reads tool_result_processing_error, paired, and the loop goes on",
    async (_, processor) => {
      const model = new ScriptedModel([
        toolTurn(echo("c1", "a"), call("c2", "fail", {}), echo("c3", "c")),
        textTurn("done"),
      ]);
      let calls = 0;
      const { runner, events, runs, postSaw } = setUp(model, {
        toolResultProcessor: (results) => {
          calls += 1;
          return processor(results) as Promise<readonly ToolResult[]>;
        },
      });

      const result = await runner.run("go");

      expect(calls).toBe(1);
      // Every handler and every Post ran: only what the model reads changed.
      expect(runs).toEqual(["echo a", "fail", "echo c"]);
      expect(postSaw).toHaveLength(3);
      expect(toolResultEvents(events)).toEqual([
        ["c1", PROCESSING_FAILED_RESULT],
        ["c2", PROCESSING_FAILED_RESULT],
        ["c3", PROCESSING_FAILED_RESULT],
      ]);
      expect(toolMessages(result.history)).toEqual([
        ["c1", PROCESSING_FAILED],
        ["c2", PROCESSING_FAILED],
        ["c3", PROCESSING_FAILED],
      ]);
      expect(() => validateToolPairing(result.history)).not.toThrow();
      expect(model.requests).toHaveLength(2);
      expect(model.requests[1]?.messages.slice(3)).toEqual([
        toolMessage(PROCESSING_FAILED, "c1"),
        toolMessage(PROCESSING_FAILED, "c2"),
        toolMessage(PROCESSING_FAILED, "c3"),
      ]);
      expect(result.finalText).toBe("done");
      model.assertExhausted();
    },
  );

  it("a failed batch leaves the next reply's batch to the processor again", async () => {
    const model = new ScriptedModel([toolTurn(echo("c1", "a")), toolTurn(echo("c2", "b")), textTurn("done")]);
    let calls = 0;
    const { runner } = setUp(model, {
      toolResultProcessor: (results) => {
        calls += 1;
        if (calls === 1) return Promise.reject(new Error("first fails"));
        return Promise.resolve(results.map((r) => toolSuccess(`ok ${r.content}`)));
      },
    });

    const result = await runner.run("go");

    expect(calls).toBe(2);
    expect(toolMessages(result.history)).toEqual([
      ["c1", PROCESSING_FAILED],
      ["c2", "ok b"],
    ]);
  });
});

describe("D8: a PostToolUse stop answers with the stopping call's processed content", () => {
  it("finalText equals the stopping call's tool message in the history; the skipped call is processed too", async () => {
    const model = new ScriptedModel([toolTurn(echo("c1", "a"), echo("c2", "b"), echo("c3", "c"))]);
    const seen: SeenBatch[] = [];
    const { runner, runs } = setUp(model, {
      toolResultProcessor: recordingProcessor(seen),
      stopAfter: "c2",
    });

    const result = await runner.run("go");

    expect(runs).toEqual(["echo a", "echo b"]);
    expect(seen.map((batch) => batch.results)).toEqual([
      [
        toolSuccess("a"),
        toolSuccess("b"),
        toolError("hook_stopped_continuation", "Skipped after PostToolUse requested a stop"),
      ],
    ]);
    expect(result.finalText).toBe("processed:b");
    expect(toolMessages(result.history)).toEqual([
      ["c1", "processed:a"],
      ["c2", "processed:b"],
      ["c3", `processed:${STOPPED}`],
    ]);
    expect(result.turns).toBe(1);
    expect(model.requests).toHaveLength(1);
    model.assertExhausted();
  });

  it("when that batch's processing fails, finalText is the processing error the history holds", async () => {
    const model = new ScriptedModel([toolTurn(echo("c1", "a"), echo("c2", "b"))]);
    const { runner } = setUp(model, {
      toolResultProcessor: () => Promise.reject(new Error("no")),
      stopAfter: "c1",
    });

    const result = await runner.run("go");

    expect(result.finalText).toBe(PROCESSING_FAILED);
    expect(toolMessages(result.history)).toEqual([
      ["c1", PROCESSING_FAILED],
      ["c2", PROCESSING_FAILED],
    ]);
    expect(model.requests).toHaveLength(1);
  });
});

describe("rule 31: the 16 MiB per-reply budget applies before the processor", () => {
  it("results past MAX_TURN_RESULT_BYTES read turn_result_limit when the processor gets them; it sees at most 16 MiB", async () => {
    const model = new ScriptedModel([
      toolTurn(
        call("c1", "emit", { char: "x", repeat: 10 * MiB }),
        call("c2", "emit", { char: "y", repeat: 10 * MiB }),
        call("c3", "emit", { char: "z", repeat: 6 * MiB }),
        call("c4", "emit", { char: "w", repeat: 1 }),
      ),
      textTurn("done"),
    ]);
    const seen: { contents: string[]; codes: (string | undefined)[]; outputBytes: number }[] = [];
    const { runner, runs } = setUp(model, {
      toolResultProcessor: (results) => {
        seen.push({
          contents: results.map((r) => (r.content.length > 1000 ? `${r.content[0]} x${r.content.length}` : r.content)),
          codes: results.map((r) => r.errorCode),
          // What the handlers returned and the budget kept, the budget's own error texts aside.
          outputBytes: results
            .filter((r) => !r.isError)
            .reduce((sum, r) => sum + Buffer.byteLength(r.content, "utf8"), 0),
        });
        return Promise.resolve(results.map((r) => toolSuccess(`seen ${Buffer.byteLength(r.content, "utf8")}`)));
      },
    });

    const result = await runner.run("go");

    expect(MAX_TURN_RESULT_BYTES).toBe(16 * MiB);
    expect(runs).toEqual([`emit ${10 * MiB}`, `emit ${10 * MiB}`, `emit ${6 * MiB}`, "emit 1"]);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.contents).toEqual([
      `x x${10 * MiB}`,
      resultLimit(10 * MiB, 6 * MiB),
      `z x${6 * MiB}`,
      resultLimit(1, 0),
    ]);
    expect(seen[0]?.codes).toEqual([undefined, "turn_result_limit", undefined, "turn_result_limit"]);
    expect(seen[0]?.outputBytes).toBe(MAX_TURN_RESULT_BYTES);
    expect(toolMessages(result.history)).toEqual([
      ["c1", `seen ${10 * MiB}`],
      ["c2", `seen ${Buffer.byteLength(resultLimit(10 * MiB, 6 * MiB))}`],
      ["c3", `seen ${6 * MiB}`],
      ["c4", `seen ${Buffer.byteLength(resultLimit(1, 0))}`],
    ]);
  });
});

describe("the history processor shapes the request, never the canonical history", () => {
  /** An observer that counts its calls and adds one guidance line to each request. */
  function countingObserver() {
    const counts = { beforeModel: 0, rounds: [] as string[][] };
    const observer: ToolRoundObserver = {
      beforeModel: () => {
        counts.beforeModel += 1;
        return [systemMessage(`guidance ${counts.beforeModel}`)];
      },
      recordToolRound: (names) => void counts.rounds.push([...names]),
    };
    return { counts, observer };
  }

  it("each request is [system prompt, ...prepared, ...guidance] while RunResult.history stays the loop's own", async () => {
    const model = new ScriptedModel([toolTurn(echo("c1", "a")), toolTurn(echo("c2", "b")), textTurn("done")]);
    const received: { snapshot: readonly ChatMessage[]; frozen: boolean; equalsRunner: boolean }[] = [];
    const { counts, observer } = countingObserver();
    const built: { runner?: AgentRunner } = {};
    const { runner } = setUp(model, {
      toolRoundObserver: observer,
      historyProcessor: (history) => {
        received.push({
          snapshot: history,
          frozen: Object.isFrozen(history),
          equalsRunner: JSON.stringify(history) === JSON.stringify(built.runner?.history),
        });
        // Keep the user's messages only, under a marker: a shorter, still paired, request history.
        return Promise.resolve([
          systemMessage(`prepared from ${history.length}`),
          ...history.filter((m) => m.role === "user"),
        ]);
      },
    });
    built.runner = runner;

    const result = await runner.run("go");

    const canonical = [
      userMessage("go"),
      assistantMessage(null, [echo("c1", "a")]),
      toolMessage("a", "c1"),
      assistantMessage(null, [echo("c2", "b")]),
      toolMessage("b", "c2"),
      assistantMessage("done"),
    ];
    expect(result.history).toEqual(canonical);
    expect(runner.history).toEqual(canonical);
    expect(model.requests.map((request) => request.messages)).toEqual([
      [systemMessage(SYSTEM_PROMPT), systemMessage("prepared from 1"), userMessage("go"), systemMessage("guidance 1")],
      [systemMessage(SYSTEM_PROMPT), systemMessage("prepared from 3"), userMessage("go"), systemMessage("guidance 2")],
      [systemMessage(SYSTEM_PROMPT), systemMessage("prepared from 5"), userMessage("go"), systemMessage("guidance 3")],
    ]);
    expect(received.map((r) => r.snapshot)).toEqual([
      canonical.slice(0, 1),
      canonical.slice(0, 3),
      canonical.slice(0, 5),
    ]);
    expect(received.map((r) => [r.frozen, r.equalsRunner])).toEqual([
      [true, true],
      [true, true],
      [true, true],
    ]);
    expect(counts.beforeModel).toBe(3);
    expect(result.turns).toBe(3);
  });

  it("a processor that writes into its snapshot changes neither the canonical history nor the request", async () => {
    const model = new ScriptedModel([textTurn("done")]);
    let writeThrew = false;
    const { runner } = setUp(model, {
      historyProcessor: (history) => {
        try {
          (history as ChatMessage[]).push(userMessage("injected"));
        } catch {
          writeThrew = true;
        }
        return Promise.resolve(history);
      },
    });

    const result = await runner.run("go");

    expect(writeThrew).toBe(true);
    expect(result.history).toEqual([userMessage("go"), assistantMessage("done")]);
    expect(model.requests[0]?.messages).toEqual([systemMessage(SYSTEM_PROMPT), userMessage("go")]);
  });

  const invalid: [string, (history: readonly ChatMessage[]) => Promise<unknown>, string | undefined][] = [
    [
      "a throw",
      () => Promise.reject(new Error("summary refused")),
      "Request history processing failed: summary refused",
    ],
    ["a non-array", () => Promise.resolve({ length: 0 }), undefined],
    ["undefined", () => Promise.resolve(undefined), undefined],
    ["a non-message item", (history) => Promise.resolve([...history, { role: "user" }]), undefined],
    [
      "a message of an unknown role",
      (history) => Promise.resolve([...history, { role: "developer", content: "x" }]),
      undefined,
    ],
    ["an orphan tool result", (history) => Promise.resolve([...history, toolMessage("x", "c9")]), undefined],
    ["a call without its result", (history) => Promise.resolve(history.filter((m) => m.role !== "tool")), undefined],
  ];

  it.each(invalid)(
    "%s fails the run with HistoryProcessingError, the canonical history attached, and no further model call",
    async (_, processor, exactMessage) => {
      const model = new ScriptedModel([toolTurn(echo("c1", "a")), textTurn("never asked")]);
      const { counts, observer } = countingObserver();
      let calls = 0;
      const { runner } = setUp(model, {
        toolRoundObserver: observer,
        historyProcessor: (history) => {
          calls += 1;
          // The first request goes out as it is; the second preparation, after one tool round, is the broken one.
          if (calls === 1) return Promise.resolve(history);
          return processor(history) as Promise<readonly ChatMessage[]>;
        },
      });

      const error: unknown = await runner.run("go").then(
        () => undefined,
        (reason: unknown) => reason,
      );

      expect(error).toBeInstanceOf(HistoryProcessingError);
      expect(error).toBeInstanceOf(AgentRunError);
      const failure = error as HistoryProcessingError;
      expect(failure.name).toBe("HistoryProcessingError");
      expect(failure.message.startsWith("Request history processing failed: ")).toBe(true);
      if (exactMessage !== undefined) expect(failure.message).toBe(exactMessage);
      expect(failure.cause).toBeDefined();
      const canonical = [userMessage("go"), assistantMessage(null, [echo("c1", "a")]), toolMessage("a", "c1")];
      expect(failure.history).toEqual(canonical);
      expect(runner.history).toEqual(canonical);
      expect(calls).toBe(2);
      expect(model.requests).toHaveLength(1);
      // D19: the failed preparation used up no guidance.
      expect(counts.beforeModel).toBe(1);
      expect(counts.rounds).toEqual([["echo"]]);
    },
  );

  it("an unpaired result's cause is the pairing check's own MessageContractError", async () => {
    const model = new ScriptedModel([textTurn("never asked")]);
    const { runner } = setUp(model, {
      historyProcessor: () => Promise.resolve([toolMessage("x", "c9")]),
    });

    const failure = (await runner.run("go").catch((reason: unknown) => reason)) as HistoryProcessingError;

    expect(failure).toBeInstanceOf(HistoryProcessingError);
    expect(failure.cause).toBeInstanceOf(MessageContractError);
    expect(failure.message).toBe("Request history processing failed: orphan tool result id: c9");
  });

  it("D19: a failure before the first request makes no model call and never asks the observer", async () => {
    const model = new ScriptedModel([textTurn("never asked")]);
    const { counts, observer } = countingObserver();
    const { runner, events } = setUp(model, {
      toolRoundObserver: observer,
      historyProcessor: () => {
        throw new Error("transcript write failed");
      },
    });

    const failure = (await runner.run("go").catch((reason: unknown) => reason)) as HistoryProcessingError;

    expect(failure).toBeInstanceOf(HistoryProcessingError);
    expect(failure.message).toBe("Request history processing failed: transcript write failed");
    expect(failure.history).toEqual([userMessage("go")]);
    expect(model.requests).toHaveLength(0);
    expect(counts.beforeModel).toBe(0);
    expect(events).toEqual([]);
  });
});

// ——— Chapter 9: the loop's TurnLifecycle (CH09.md §1.7, rules 29, 39–41; the book lists this file as its loop test). ———

/** A lifecycle that writes each call into `trace`, answering `beforeModel` with `messages()`. */
function tracingLifecycle(trace: string[], messages: () => readonly ChatMessage[] = () => []): TurnLifecycle {
  return {
    beginTurn: (query) => {
      trace.push(`begin:${query}`);
      return Promise.resolve();
    },
    beforeModel: () => {
      trace.push("before");
      return messages();
    },
    complete: (history) => {
      trace.push(`complete:${history.length}`);
      return Promise.resolve();
    },
  };
}

/** A runner with the test tools whose hooks, history processor, observer and model all write into one trace. */
function lifecycleRunner(
  model: ScriptedModel,
  turnLifecycle: TurnLifecycle,
  trace: string[],
  options: { hooks?: HookRegistry; maxTurns?: number; historyProcessor?: boolean } = {},
) {
  return new AgentRunner({
    model,
    tools: testTools(),
    systemPrompt: "test",
    workspace: "/nowhere",
    hooks: options.hooks,
    maxTurns: options.maxTurns,
    turnLifecycle,
    historyProcessor:
      options.historyProcessor === true
        ? {
            prepare: (history) => {
              trace.push("prepare");
              return Promise.resolve(history);
            },
          }
        : undefined,
    onEvent: (event) => {
      if (event.type === "model_request") trace.push(`model_request ${event.turn}`);
    },
  });
}

/** Hooks that write their events into `trace`; Stop answers with `stop()`. */
function tracingHooks(trace: string[], stop: () => HookResult = () => new HookResult()): HookRegistry {
  const hooks = new HookRegistry();
  hooks.register("UserPromptSubmit", () => {
    trace.push("UserPromptSubmit");
    return new HookResult();
  });
  hooks.register("Stop", () => {
    trace.push("Stop");
    return stop();
  });
  return hooks;
}

describe("chapter 9: the turn lifecycle around one run", () => {
  it("the lifecycle's message goes into the request after the history and never into the canonical history", async () => {
    const model = new ScriptedModel([textTurn("done")]);
    const trace: string[] = [];
    const runner = lifecycleRunner(
      model,
      tracingLifecycle(trace, () => [userMessage("memory context")]),
      [],
    );

    const result = await runner.run("go");

    expect(model.requests[0]?.messages).toEqual([
      { role: "system", content: "test" },
      userMessage("go"),
      userMessage("memory context"),
    ]);
    expect(result.history).toEqual([userMessage("go"), assistantMessage("done")]);
    expect(trace).toEqual(["begin:go", "before", "complete:2"]);
  });

  it("order: UserPromptSubmit, beginTurn once, then per request the history processor, beforeModel and the request; Stop, then complete once", async () => {
    const model = new ScriptedModel([toolTurn(echo("c1", "a")), textTurn("done")]);
    const trace: string[] = [];
    const runner = lifecycleRunner(model, tracingLifecycle(trace), trace, {
      hooks: tracingHooks(trace),
      historyProcessor: true,
    });

    await runner.run("go");

    expect(trace).toEqual([
      "UserPromptSubmit",
      "begin:go",
      "prepare",
      "before",
      "model_request 1",
      "prepare",
      "before",
      "model_request 2",
      "Stop",
      "complete:4",
    ]);
  });

  it("each request is [system prompt, ...prepared history, ...lifecycle messages, ...observer guidance]", async () => {
    const asking = toolTurn(echo("c1", "a"));
    const model = new ScriptedModel([asking, textTurn("done")]);
    const runner = new AgentRunner({
      model,
      tools: testTools(),
      systemPrompt: "test",
      workspace: "/nowhere",
      // Like a summary: the request's history is not the canonical one.
      historyProcessor: {
        prepare: (history) => Promise.resolve([userMessage("summary"), ...history.slice(1)]),
      },
      turnLifecycle: tracingLifecycle([], () => [systemMessage("memory"), userMessage("more memory")]),
      toolRoundObserver: { beforeModel: () => [systemMessage("guidance")], recordToolRound: () => undefined },
    });

    const result = await runner.run("go");

    const tail = [systemMessage("memory"), userMessage("more memory"), systemMessage("guidance")];
    expect(model.requests.map((request) => request.messages)).toEqual([
      [systemMessage("test"), userMessage("summary"), ...tail],
      [systemMessage("test"), userMessage("summary"), asking.message, toolMessage("a", "c1"), ...tail],
    ]);
    expect(result.history.map((message) => message.content)).toEqual(["go", null, "a", "done"]);
  });

  it("the lifecycle's messages are frozen copies: changing what it returned afterwards changes no request", async () => {
    const model = new ScriptedModel([textTurn("done")]);
    const returned = { role: "system", content: "memory" };
    const runner = lifecycleRunner(
      model,
      tracingLifecycle([], () => [returned as ChatMessage]),
      [],
    );

    await runner.run("go");
    returned.content = "changed";

    const sent = model.requests[0]?.messages[2];
    expect(sent).toEqual(systemMessage("memory"));
    expect(sent).not.toBe(returned);
    expect(Object.isFrozen(sent)).toBe(true);
  });

  it("a forceContinue keeps the same run: one beginTurn, and complete once at the true end", async () => {
    const model = new ScriptedModel([textTurn("first"), textTurn("second")]);
    const trace: string[] = [];
    let stops = 0;
    const hooks = tracingHooks(trace, () => {
      stops += 1;
      return new HookResult(stops === 1 ? { forceContinue: userMessage("again") } : {});
    });
    const runner = lifecycleRunner(model, tracingLifecycle(trace), trace, { hooks });

    const result = await runner.run("go");

    expect(result.finalText).toBe("second");
    expect(trace).toEqual([
      "UserPromptSubmit",
      "begin:go",
      "before",
      "model_request 1",
      "Stop",
      "before",
      "model_request 2",
      "Stop",
      "complete:4",
    ]);
  });

  it("a PostToolUse stop ends the run with its answer, so complete runs", async () => {
    const model = new ScriptedModel([toolTurn(echo("c1", "a")), textTurn("never asked")]);
    const trace: string[] = [];
    const hooks = new HookRegistry();
    hooks.register("PostToolUse", () => new HookResult({ preventContinuation: true }));
    const runner = lifecycleRunner(model, tracingLifecycle(trace), trace, { hooks });

    const result = await runner.run("go");

    expect(result.finalText).toBe("a");
    expect(trace).toEqual(["begin:go", "before", "model_request 1", "complete:3"]);
  });

  it("a failed UserPromptSubmit fails the run before beginTurn", async () => {
    const model = new ScriptedModel([textTurn("never asked")]);
    const trace: string[] = [];
    const hooks = new HookRegistry();
    hooks.register("UserPromptSubmit", () => {
      throw new Error("hook broke");
    });
    const runner = lifecycleRunner(model, tracingLifecycle(trace), trace, { hooks });

    await expect(runner.run("go")).rejects.toThrow(HookRunError);
    expect(trace).toEqual([]);
    expect(model.requests).toHaveLength(0);
  });

  it.each([
    ["the turn limit", [toolTurn(echo("c1", "a"))], { maxTurns: 1 }, AgentLimitError],
    ["a reply cut at the token limit", [textTurn("[]", "length")], {}, IncompleteModelReplyError],
    ["a failed model call", [], {}, Error],
    ["a reply with neither text nor calls", [textTurn("  ")], {}, AgentRunError],
  ] as const)("no failed run calls complete: %s", async (_name, replies, options, failure) => {
    const model = new ScriptedModel(replies);
    const trace: string[] = [];
    const runner = lifecycleRunner(model, tracingLifecycle(trace), trace, options);

    await expect(runner.run("go")).rejects.toBeInstanceOf(failure);
    expect(trace.filter((row) => row.startsWith("complete"))).toEqual([]);
    expect(trace[0]).toBe("begin:go");
  });

  it("no failed run calls complete: a failed Stop hook", async () => {
    const model = new ScriptedModel([textTurn("done")]);
    const trace: string[] = [];
    const hooks = tracingHooks(trace, () => {
      throw new Error("stop broke");
    });
    const runner = lifecycleRunner(model, tracingLifecycle(trace), trace, { hooks });

    await expect(runner.run("go")).rejects.toThrow(HookRunError);
    expect(trace).toEqual(["UserPromptSubmit", "begin:go", "before", "model_request 1", "Stop"]);
  });

  it("no failed run calls complete: a failed history processor", async () => {
    const model = new ScriptedModel([textTurn("never asked")]);
    const trace: string[] = [];
    const runner = new AgentRunner({
      model,
      tools: testTools(),
      systemPrompt: "test",
      workspace: "/nowhere",
      turnLifecycle: tracingLifecycle(trace),
      historyProcessor: { prepare: () => Promise.reject(new Error("disk full")) },
    });

    await expect(runner.run("go")).rejects.toThrow(HistoryProcessingError);
    expect(trace).toEqual(["begin:go"]);
    expect(model.requests).toHaveLength(0);
  });
});

describe("chapter 9: a broken lifecycle fails the run as 'Turn lifecycle failed'", () => {
  const broken = (overrides: Partial<TurnLifecycle>): TurnLifecycle => ({ ...tracingLifecycle([]), ...overrides });

  it.each([
    ["beginTurn throws", broken({ beginTurn: () => Promise.reject(new Error("no store")) })],
    [
      "beforeModel throws",
      broken({
        beforeModel: () => {
          throw new Error("no text");
        },
      }),
    ],
    ["beforeModel returns no array", broken({ beforeModel: () => "memory" as never })],
    ["beforeModel returns an assistant message", broken({ beforeModel: () => [assistantMessage("memory")] })],
    ["beforeModel returns a tool message", broken({ beforeModel: () => [toolMessage("memory", "c1")] })],
    ["beforeModel returns a message without text", broken({ beforeModel: () => [{ role: "system" } as never] })],
    [
      "beforeModel returns a message with an extra key",
      broken({ beforeModel: () => [{ role: "system", content: "m", name: "x" } as never] }),
    ],
    [
      "beforeModel returns a message whose content is a getter",
      broken({
        beforeModel: () => [
          Object.defineProperty({ role: "system" }, "content", { get: () => "memory", enumerable: true }) as never,
        ],
      }),
    ],
    ["beforeModel returns null in the array", broken({ beforeModel: () => [null as never] })],
  ] as const)("%s: no model call is made", async (_name, lifecycle) => {
    const model = new ScriptedModel([textTurn("never asked")]);
    const runner = lifecycleRunner(model, lifecycle, []);

    const failure = (await runner.run("go").catch((reason: unknown) => reason)) as AgentRunError;

    expect(failure).toBeInstanceOf(AgentRunError);
    expect(failure.message).toBe("Turn lifecycle failed");
    expect(failure.cause).toBeInstanceOf(Error);
    expect(model.requests).toHaveLength(0);
  });

  it("complete throws: the answer is not returned, the run fails after its one request", async () => {
    const model = new ScriptedModel([textTurn("done")]);
    const runner = lifecycleRunner(model, broken({ complete: () => Promise.reject(new Error("disk full")) }), []);

    const failure = (await runner.run("go").catch((reason: unknown) => reason)) as AgentRunError;

    expect(failure.message).toBe("Turn lifecycle failed");
    expect((failure.cause as Error).message).toBe("disk full");
    expect(model.requests).toHaveLength(1);
  });

  it("a TurnLifecycleRefusal from beginTurn is passed on as it is, before any model call", async () => {
    const model = new ScriptedModel([textTurn("never asked")]);
    const refusal = new TurnLifecycleRefusal("memory manifest has an invalid schema");
    const trace: string[] = [];
    const runner = lifecycleRunner(model, broken({ beginTurn: () => Promise.reject(refusal) }), trace);

    await expect(runner.run("go")).rejects.toBe(refusal);
    expect(refusal).toBeInstanceOf(AgentRunError);
    expect(model.requests).toHaveLength(0);
    expect(runner.history).toEqual([userMessage("go")]);
  });

  it("a TurnLifecycleRefusal from complete is no refusal: the run is over, so it is 'Turn lifecycle failed'", async () => {
    const model = new ScriptedModel([textTurn("done")]);
    const refusal = new TurnLifecycleRefusal("too late");
    const runner = lifecycleRunner(model, broken({ complete: () => Promise.reject(refusal) }), []);

    const failure = (await runner.run("go").catch((reason: unknown) => reason)) as AgentRunError;

    expect(failure).not.toBe(refusal);
    expect(failure.message).toBe("Turn lifecycle failed");
    expect(failure.cause).toBe(refusal);
  });
});
