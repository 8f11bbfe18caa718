import { describe, expect, it } from "vitest";
import { isToolResult, toolError, toolSuccess } from "../src/core/tool-result.js";

describe("ToolResult", () => {
  it("toolSuccess is a frozen success value", () => {
    const result = toolSuccess("hello");
    expect(result).toEqual({ content: "hello", isError: false });
    expect(Object.isFrozen(result)).toBe(true);
  });

  it("toolError formats the content with its stable code and is frozen", () => {
    const result = toolError("unknown_tool", "Unknown tool: nope");
    expect(result).toEqual({
      content: "Error [unknown_tool]: Unknown tool: nope",
      isError: true,
      errorCode: "unknown_tool",
    });
    expect(Object.isFrozen(result)).toBe(true);
  });

  it.each<[unknown, boolean]>([
    [{ content: "x", isError: false }, true],
    [{ content: "x", isError: true, errorCode: "c" }, true],
    [{ content: "x", isError: true }, false],
    [{ content: "x", isError: true, errorCode: "" }, false],
    [{ content: "x", isError: true, errorCode: 3 }, false],
    [{ content: 1, isError: false }, false],
    [{ content: "x", isError: "false" }, false],
    [{ content: "x" }, false],
    ["x", false],
    [null, false],
    [undefined, false],
  ])("isToolResult(%j) is %s", (value, expected) => {
    expect(isToolResult(value)).toBe(expected);
  });
});
