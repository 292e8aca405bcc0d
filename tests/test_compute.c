#include "testutil.h"
static void t_none(void){CU_ASSERT(1);}
int main(void){static const test_case c[]={TEST(t_none),{0,0}};return test_run("compute",c);}
