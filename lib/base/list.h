/* Intrusive doubly linked lists. An item is a struct with `next` and `prev`
 * members pointing at its own type; a list is a head pointer to the first item
 * (NULL when empty). Header only; no dependencies. */
#pragma once

#include <stddef.h>

/* Puts item first in the list whose head pointer is head. */
#define LIST_PREPEND(head, item)                                                                   \
    do {                                                                                           \
        __typeof__(*(head)) **_list_head = &(head), *_list_item = (item);                          \
        _list_item->prev = NULL;                                                                   \
        _list_item->next = *_list_head;                                                            \
        if (_list_item->next)                                                                      \
            _list_item->next->prev = _list_item;                                                   \
        *_list_head = _list_item;                                                                  \
    } while (0)

/* Takes item out of the list whose head pointer is head; its links are cleared,
 * so that removing an item not in any list changes nothing. */
#define LIST_REMOVE(head, item)                                                                    \
    do {                                                                                           \
        __typeof__(*(head)) **_list_head = &(head), *_list_item = (item);                          \
        if (_list_item->next)                                                                      \
            _list_item->next->prev = _list_item->prev;                                             \
        if (_list_item->prev)                                                                      \
            _list_item->prev->next = _list_item->next;                                             \
        else if (*_list_head == _list_item)                                                        \
            *_list_head = _list_item->next;                                                        \
        _list_item->next = _list_item->prev = NULL;                                                \
    } while (0)
