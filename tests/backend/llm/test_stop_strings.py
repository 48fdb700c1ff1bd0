from backend.llm.stop_strings import find_stop, safe_prefix_length


def test_find_stop_returns_the_earliest_of_several_stop_strings():
    text = "Thought: look up\nAction: search\nObservation:"
    assert find_stop(text, ["Observation:", "\nAction"]) == text.index("\nAction")
    assert find_stop(text, ["Final Answer:"]) is None
    assert find_stop(text, [""]) is None  # an empty stop string never matches


def test_safe_prefix_holds_back_only_a_tail_that_could_become_a_stop_string():
    assert safe_prefix_length("The answer is Obs", ["Observation:"]) == len("The answer is ")
    assert safe_prefix_length("The answer is 42", ["Observation:"]) == len("The answer is 42")
    # the longest partial match wins when several stop strings overlap the tail
    assert safe_prefix_length("abc\n\n", ["\n\n\n", "c\n\nX"]) == len("ab")
    assert safe_prefix_length("anything", []) == len("anything")
