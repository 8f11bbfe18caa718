import { HookRegistry, HookResult, type HookContext } from "../core/hooks.js";
import type { Terminal } from "./terminal.js";
import { visible } from "./visible.js";

/** The tool a Pre or Post context is about, as the registry stores it. */
function toolName(context: HookContext): string {
  if (context.prepared === undefined) throw new Error(`${context.event} context is incomplete`);
  return context.prepared.definition.name;
}

/**
 * The hooks every chapter 4 run registers first: one stderr line per event, next to the `[Permission]`
 * lines and like them printed even with --quiet. They observe only: no rewrite, no recommendation.
 */
export function liveHooks(terminal: Terminal): HookRegistry {
  const hooks = new HookRegistry();
  hooks.register("UserPromptSubmit", () => {
    terminal.line("[Hook] UserPromptSubmit");
    return new HookResult();
  });
  hooks.register("PreToolUse", (context) => {
    terminal.line(visible(`[Hook] PreToolUse: ${toolName(context)}`));
    return new HookResult();
  });
  hooks.register("PostToolUse", (context) => {
    if (context.result === undefined) throw new Error("PostToolUse context is incomplete");
    const outcome = context.result.isError ? "error" : "ok";
    terminal.line(visible(`[Hook] PostToolUse: ${toolName(context)} -> ${outcome}`));
    return new HookResult();
  });
  hooks.register("Stop", () => {
    terminal.line("[Hook] Stop");
    return new HookResult();
  });
  return hooks;
}
