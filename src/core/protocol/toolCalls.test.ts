import { describe, expect, it } from 'vitest';
import { SPAWN_CLONE_TOOL, cloneRequests, extractToolCalls, sharedContextKeys, cloneUserMessage, renderSharedContext } from './toolCalls';

const call = (payload: string) => `I will delegate.\n<tool_call>${payload}</tool_call>\n`;

describe('tool calls in Hermes form, read as the reference reads them', () => {
  it('parses valid calls in order, arguments as an object or a JSON string, not repaired', () => {
    const text =
      call('{"name": "spawn_clone", "arguments": {"objectives": ["3*4", "5+6"]}}') +
      call('{"name": "spawn_clone", "arguments": "{\\"objectives\\": [\\"7-2\\"]}"}');
    const { calls, dropped } = extractToolCalls(text);
    expect(dropped).toEqual([]);
    expect(calls).toEqual([
      { name: 'spawn_clone', arguments: { objectives: ['3*4', '5+6'] }, repaired: false },
      { name: 'spawn_clone', arguments: { objectives: ['7-2'] }, repaired: false },
    ]);
  });

  it('repairs what JSON.parse refuses and counts the call as repaired, at any of the three stages', () => {
    // Single quotes and a trailing comma; a missing closing brace; arguments as a broken string.
    for (const payload of [
      "{'name': 'spawn_clone', 'arguments': {'objectives': ['3*4'],}}",
      '{"name": "spawn_clone", "arguments": {"objectives": ["3*4"]}',
      '{"name": "spawn_clone", "arguments": "{objectives: [\\"3*4\\"]}"}',
    ]) {
      const { calls, dropped } = extractToolCalls(call(payload));
      expect(dropped, payload).toEqual([]);
      expect(calls, payload).toEqual([{ name: 'spawn_clone', arguments: { objectives: ['3*4'] }, repaired: true }]);
    }
  });

  it('finds nothing without both markers, drops a call without name or arguments, and never throws on garbage', () => {
    expect(extractToolCalls('<tool_call>{"name": "spawn_clone", "arguments": {}}')).toEqual({ calls: [], dropped: [] });
    expect(extractToolCalls('no call here')).toEqual({ calls: [], dropped: [] });
    const { calls, dropped } = extractToolCalls(
      call('{"arguments": {"objectives": ["x"]}}') + call('[1, 2]') + call('{"name": "spawn_clone", "arguments": null}'),
    );
    expect(calls).toEqual([]);
    expect(dropped.map((d) => d.reason)).toEqual([
      'the call lacks its name or its arguments',
      'the payload is not an object',
      'the call lacks its name or its arguments',
    ]);
    for (const junk of [
      '<tool_call></tool_call>',
      '<tool_call>}{][</tool_call>',
      `<tool_call>${'{'.repeat(500)}</tool_call>`,
      '<tool_call>"\\u12"</tool_call>',
    ]) {
      expect(() => extractToolCalls(junk)).not.toThrow();
    }
  });
});

describe('spawn_clone arguments as clone requests, as the reference normalises them', () => {
  it('takes objectives as strings or objects, the call-wide shared context, and names', () => {
    expect(
      cloneRequests({
        objectives: [' Find k3. ', { instruction: 'Find k7.', shared_context: 'k7' }, { objective: 'Find k9.', name: 'nine' }],
        shared_context: ['k3', ' k9 ', null, ''],
        names: ['three'],
      }),
    ).toEqual({
      requests: [
        { index: 0, instruction: 'Find k3.', sharedContextKeys: ['k3', 'k9'], name: 'three' },
        { index: 1, instruction: 'Find k7.', sharedContextKeys: ['k7'], name: null },
        { index: 2, instruction: 'Find k9.', sharedContextKeys: ['k3', 'k9'], name: 'nine' },
      ],
      rejected: [],
    });
    // `tasks`, one `objective`, a single string, `context` for shared_context.
    expect(cloneRequests({ tasks: ['a'] }).requests.map((r) => r.instruction)).toEqual(['a']);
    expect(cloneRequests({ objective: 'b', context: { keys: ['k1'] } }).requests).toEqual([
      { index: 0, instruction: 'b', sharedContextKeys: ['k1'], name: null },
    ]);
    expect(cloneRequests({ objectives: 'c' }).requests.map((r) => r.instruction)).toEqual(['c']);
  });

  it("rejects with the reference's reasons and accepts nothing from a call without objectives", () => {
    expect(cloneRequests({ objectives: ['', { name: 'x' }, { instruction: 5 }, 7] }).rejected).toEqual([
      { index: 0, name: null, reason: 'failed due to missing instruction' },
      { index: 1, name: 'x', reason: 'failed due to missing instruction' },
      { index: 2, name: null, reason: 'failed due to invalid instruction type' },
      { index: 3, name: null, reason: 'failed due to invalid objective type' },
    ]);
    expect(cloneRequests({ objectives: { a: 1 } }).rejected).toEqual([{ index: 0, name: null, reason: 'failed due to invalid objectives format' }]);
    expect(cloneRequests({})).toEqual({ requests: [], rejected: [] });
    expect(cloneRequests('not an object')).toEqual({ requests: [], rejected: [] });
    expect(sharedContextKeys({ titles: ['Paris'] })).toEqual(['Paris']);
    expect(sharedContextKeys(42)).toEqual(['42']);
  });

  it('advertises the tool as the reference does: objectives required, shared_context optional', () => {
    expect(SPAWN_CLONE_TOOL.function.name).toBe('spawn_clone');
    expect(SPAWN_CLONE_TOOL.function.parameters.required).toEqual(['objectives']);
    expect(Object.keys(SPAWN_CLONE_TOOL.function.parameters.properties)).toEqual(['objectives', 'shared_context']);
  });
});

describe("a clone's shared context, expanded as the reference expands it", () => {
  const context = { k1: 'ab = 3', 'Chunk Two': '  cd = ab + 1  ', empty: ' ' };
  it('writes each key found under its name after the instruction, matching keys by their normalised form, and names the missing', () => {
    expect(renderSharedContext([], context)).toBe('');
    expect(renderSharedContext(['k1', 'chunk   two'], context)).toBe('Shared context (expanded from keys):\n\n[k1]\nab = 3\n\n[Chunk Two]\ncd = ab + 1');
    expect(renderSharedContext(['k1', 'k9', 'empty', 'constructor'], context)).toBe(
      'Shared context (expanded from keys):\n\n[k1]\nab = 3\n\nMissing context keys: k9, empty, constructor',
    );
    expect(renderSharedContext(['k1'], {})).toBe('Shared context requested but no context map is available. Missing keys: k1');
    expect(cloneUserMessage({ instruction: 'find ab', sharedContextKeys: ['k1'] }, context)).toBe(
      'find ab\n\nShared context (expanded from keys):\n\n[k1]\nab = 3',
    );
    expect(cloneUserMessage({ instruction: 'find ab', sharedContextKeys: [] }, context)).toBe('find ab');
  });
});
